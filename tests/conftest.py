"""Suite-wide settings. Fixtures live in tests/<suite>/conftest.py."""

from hypothesis import settings

# Wall-clock deadlines turn a busy 2-core machine into flaky failures; examples stay bounded
# by their count instead.
settings.register_profile("project", deadline=None)
settings.load_profile("project")
