"""rocketmq-py: Apache RocketMQ's design on asyncio, as one import package.

The repository keeps the design card's folders (``client/``, ``broker/``, ``store/``,
``remoting/``, ``common/``, ``acl/``, ``namesrv/``, ``tools/``, ``conf/``); ``pyproject.toml``
maps each of them into this package (``rocketmq_py.client``, ...), so that an install puts nothing
generic into site-packages and a user's own ``client.py`` or ``tools/`` never shadows the SDK.
"""
