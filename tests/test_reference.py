"""docs/reference is generated from the code (scripts/reference.py, ``make reference``): the
committed files must be what the generator makes now, every ``loadsched.io/`` key the product
spells must be in ``shared/annotation_keys.py``, and the policy's JSON Schema must take the
policies the project ships and refuse what loading refuses."""

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import jsonschema
import pytest
import yaml

from shared.annotation_keys import HOT_VALUE_KEY, KEYS
from shared.policy import DEFAULT_POLICY_YAML, default_policy, policy_json_schema

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("annotator", "extender", "shared", "poller", "kubectl_loadsched", "charts", "examples")
"""Where the product's source is (the sandbox's and the benches' own keys are not in a cluster)."""
LOADSCHED_KEY = re.compile(r"[a-z0-9.-]*loadsched\.io/[A-Za-z0-9_.-]*[A-Za-z0-9]")
POLICIES = sorted(
    [*(ROOT / "examples").glob("policy*.yaml"), ROOT / "charts/loadsched/files/policy.yaml"]
)


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference", ROOT / "scripts" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("reference", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load_generator()


@pytest.fixture(scope="module")
def generated(generator: ModuleType) -> dict[str, str]:
    pages: dict[str, str] = generator.pages()
    return pages


def test_the_committed_reference_is_what_the_code_says(
    generator: ModuleType, generated: dict[str, str]
) -> None:
    stale = generator.stale(generated)
    assert not stale, f"run `make reference` and commit the result; stale: {', '.join(stale)}"


def test_the_check_names_a_page_that_differs(
    generator: ModuleType, generated: dict[str, str], tmp_path: Path
) -> None:
    """What ``--check`` reports when one flag's help changed and the page was not made anew."""
    out = tmp_path / "docs" / "reference"
    out.mkdir(parents=True)
    for name, text in generated.items():
        (out / name).write_text(text, encoding="utf-8")
    (out / "cli.md").write_text(generated["cli.md"] + "| `--gone` | | | | a flag removed |\n")
    assert generator.stale(generated, out) == ["docs/reference/cli.md"]


def test_every_page_is_deterministic(generator: ModuleType, generated: dict[str, str]) -> None:
    assert generator.pages() == generated


def product_files() -> list[Path]:
    found = []
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in {".py", ".yaml", ".yml", ".json", ".tpl", ".txt"}:
                found.append(path)
    return found


def test_every_loadsched_key_in_the_source_is_listed() -> None:
    listed = {use.key for use in KEYS}
    unlisted = {
        f"{key} ({path.relative_to(ROOT)})"
        for path in product_files()
        for key in LOADSCHED_KEY.findall(path.read_text(encoding="utf-8", errors="replace"))
        if key not in listed
    }
    assert not unlisted, "add these keys to shared/annotation_keys.py, then `make reference`"
    assert len(product_files()) > 100, "the walk found the product's source"


def test_crane_keys_of_the_default_policy_are_listed() -> None:
    listed = {use.key for use in KEYS if use.crane}
    names = {sync.name for sync in default_policy().spec.sync_policy}
    assert listed == names | {HOT_VALUE_KEY}


@pytest.mark.parametrize("path", POLICIES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_policy_schema_takes_the_shipped_policies(path: Path) -> None:
    validator = jsonschema.Draft202012Validator(policy_json_schema())
    assert [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))] == []


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda p: p["spec"].update(unknown=1), "spec"),
        (lambda p: p["spec"]["syncPolicy"][0].update(period="3 minutes"), "period"),
        (lambda p: p["spec"]["predicate"][0].update(maxLimitPecent=1.5), "maxLimitPecent"),
        (lambda p: p["spec"]["predicate"][0].update(maxLimitPercent=0.5), "predicate"),
        (lambda p: p["spec"]["hotValue"][0].update(count=0), "count"),
        (lambda p: p["spec"].update(staleData="failSometimes"), "staleData"),
    ],
    ids=["unknown field", "not a Go duration", "over 1", "both spellings", "count 0", "enum"],
)
def test_the_policy_schema_refuses_what_loading_refuses(change: object, path: str) -> None:
    policy = yaml.safe_load(DEFAULT_POLICY_YAML)
    change(policy)  # type: ignore[operator]
    errors = list(jsonschema.Draft202012Validator(policy_json_schema()).iter_errors(policy))
    assert errors and any(path in str(list(e.absolute_path)) + e.message for e in errors)
