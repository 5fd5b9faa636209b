from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def data() -> Path:
    return DATA
