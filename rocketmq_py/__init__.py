"""rocketmq-py: Apache RocketMQ's design on asyncio, as one import package.

The repository keeps the design card's folders (``client/``, ``broker/``, ``store/``,
``remoting/``, ``common/``, ``acl/``, ``namesrv/``, ``tools/``, ``conf/``); ``pyproject.toml``
maps each of them into this package (``rocketmq_py.client``, ...), so that an install puts nothing
generic into site-packages and a user's own ``client.py`` or ``tools/`` never shadows the SDK.
"""

from __future__ import annotations

import pkgutil

# A checkout's rocketmq_py/ (this folder, with no subpackages of its own) put first on sys.path,
# as the tests and their daemons do, must not hide an installed package's subpackages: the mypyc
# build's tests run the checkout's tests against the compiled wheel (`make test`, .venv-mypyc).
# Under the editable install nothing is added: its import hook maps the subpackages.
__path__ = pkgutil.extend_path(__path__, __name__)

# after __path__, which may be where it is found
from rocketmq_py.common.build import compiled

__all__ = ["compiled"]
