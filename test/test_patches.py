"""One test per patch in patches/series: each check fails on the tree without that patch and passes with it."""
import pytest
from patchtest import assert_patch_needed

@pytest.fixture(scope="module")
def trees(tmp_path_factory): return tmp_path_factory.mktemp("trees")

def test_0001_llm_model_imports(trees):
  assert_patch_needed(trees, "0001", "import tinygrad.llm.model as m; assert m.amd_custom_kernels_supported('CPU') is False")
