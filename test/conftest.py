import os
import apps  # noqa: F401  (puts the patched upstream/ tinygrad first on sys.path, or stops with the fix)
from hypothesis import settings

settings.register_profile("default", deadline=None, print_blob=True)
settings.register_profile("ci", deadline=None, print_blob=True, max_examples=50)
settings.load_profile("ci" if os.environ.get("CI") else "default")
