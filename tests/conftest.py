"""Shared test set-up: a private kernel cache per test session, so tests never touch the user's."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_kernel_cache(tmp_path_factory):
    import os
    previous = os.environ.get("HG_CACHE_DIR")
    os.environ["HG_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernel-cache"))
    yield
    if previous is None:
        os.environ.pop("HG_CACHE_DIR", None)
    else:
        os.environ["HG_CACHE_DIR"] = previous
