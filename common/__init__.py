"""What every daemon and tool shares below the protocol (RocketMQ's ``common`` and ``srvutil``):
configuration from properties files, crash-safe small files, logging setup, the daemon's
lifecycle and one-line CLI failures, the event loop and busy polling, Prometheus exposition, and
MQVersion's names. It imports nothing else of the package, so remoting and everything above may
use it."""
