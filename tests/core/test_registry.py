"""``core.registry.Registry`` and the registries built on it: names, lazy imports, entry points."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray import backends
from crabray.agents import Agent, AgentSpec, create_agent, register_agent
from crabray.agents import registry as agent_registry
from crabray.core.errors import (
    ConfigError,
    DuplicateNameError,
    MissingDependencyError,
    UnknownNameError,
)
from crabray.core.registry import Registry
from crabray.formats import SuiteFormat, register_format, resolve_suite
from crabray.formats import base as format_base
from crabray.formats.suite import Suite


class First:
    pass


class Second:
    pass


def make() -> Registry[type]:
    return Registry("widget", field="--widget")


def test_the_same_object_twice_is_fine_a_different_one_is_an_error() -> None:
    widgets = make()
    widgets.register("w", First)
    widgets.register("w", First)
    with pytest.raises(DuplicateNameError) as raised:
        widgets.register("w", Second)
    assert raised.value.field == "--widget"
    assert f"{__name__}.First" in str(raised.value) and f"{__name__}.Second" in str(raised.value)
    assert widgets.get("w") is First


def test_an_unknown_name_lists_the_known_ones() -> None:
    widgets = make()
    widgets.register("b", First)
    widgets.add_lazy("a", "crabray_no_such_module:Thing")
    with pytest.raises(UnknownNameError) as raised:
        widgets.get("c")
    assert isinstance(raised.value, ConfigError)
    assert str(raised.value) == "--widget: unknown widget 'c'; known: a, b"
    assert raised.value.known == ["a", "b"]


def test_a_lazy_entry_is_imported_only_when_asked_for(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "crabray_test_lazy_widget.py").write_text("class Widget:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    widgets = make()
    widgets.add_lazy("lazy", "crabray_test_lazy_widget:Widget")
    assert widgets.available() == ["lazy"] and "lazy" in widgets
    assert "crabray_test_lazy_widget" not in sys.modules
    assert widgets.get("lazy").__name__ == "Widget"
    assert "crabray_test_lazy_widget" in sys.modules
    del sys.modules["crabray_test_lazy_widget"]


def test_a_lazy_module_that_registers_itself_is_accepted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its decorator registers it on import; asking for it again made a second instance
    that replaced the first (and logged the registration twice)."""
    (tmp_path / "crabray_test_widgets.py").write_text(
        "from crabray.core.registry import Registry\n"
        "# One instance per class, as the formats' registry stores.\n"
        "WIDGETS = Registry('widget', accept=lambda _name, cls: cls())\n"
    )
    (tmp_path / "crabray_test_self_widget.py").write_text(
        "from crabray_test_widgets import WIDGETS\n"
        "class Widget:\n"
        "    made = 0\n"
        "    def __init__(self):\n"
        "        Widget.made += 1\n"
        "WIDGETS.register('self', Widget)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from crabray_test_widgets import WIDGETS

    WIDGETS.add_lazy("self", "crabray_test_self_widget:Widget")
    first = WIDGETS.get("self")
    assert type(first).made == 1
    assert WIDGETS.get("self") is first
    del sys.modules["crabray_test_self_widget"], sys.modules["crabray_test_widgets"]


def test_a_missing_dependency_names_the_package_and_what_to_install() -> None:
    widgets = make()
    widgets.add_lazy("fancy", "crabray_test_missing_dep:Fancy", install_hint="pip install fancy")
    assert widgets.available() == ["fancy"]
    with pytest.raises(MissingDependencyError) as raised:
        widgets.get("fancy")
    assert raised.value.missing == "crabray_test_missing_dep"
    assert "needs the missing package 'crabray_test_missing_dep'" in str(raised.value)
    assert "install it with: pip install fancy" in str(raised.value)


@pytest.mark.parametrize(
    "body", ["from crabray_test_broken import _gone", "import crabray_test_broken._gone"]
)
def test_an_import_error_inside_the_targets_own_package_is_not_hidden(
    body: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "crabray_test_broken"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "widget.py").write_text(body + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    widgets = make()
    widgets.add_lazy("broken", "crabray_test_broken.widget:Widget", install_hint="pip install x")
    with pytest.raises(ImportError) as raised:
        widgets.get("broken")
    assert not isinstance(raised.value, ConfigError)
    for name in [m for m in sys.modules if m.startswith("crabray_test_broken")]:
        del sys.modules[name]


def test_a_target_without_that_attribute_is_a_config_error() -> None:
    widgets = make()
    widgets.add_lazy("odd", "collections:NoSuchThing")
    with pytest.raises(ConfigError, match="collections:NoSuchThing, which does not exist"):
        widgets.get("odd")


def test_accept_refuses_the_wrong_kind_of_object() -> None:
    def only_classes(name: str, obj: object) -> type:
        if not isinstance(obj, type):
            raise TypeError(f"{name} must be a class")
        return obj

    widgets: Registry[type] = Registry("widget", accept=only_classes)
    with pytest.raises(TypeError, match="w must be a class"):
        widgets.register("w", 42)


def test_a_copy_is_independent() -> None:
    widgets = make()
    widgets.register("a", First)
    clone = widgets.copy()
    clone.register("b", Second)
    assert widgets.available() == ["a"] and clone.available() == ["a", "b"]


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on ``sys.path`` that pip-installed packages' metadata can be written into."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path


def declare(site: Path, dist: str, group: str, entries: dict[str, str]) -> None:
    """The metadata an installed distribution leaves: what ``importlib.metadata`` reads."""
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}")


def test_entry_points_are_listed_without_importing_and_found_on_a_miss(installed: Path) -> None:
    group = "crabray.test_widgets"
    targets = {"ordered": "collections:OrderedDict", "gone": "crabray_test_gone:Thing"}
    declare(installed, "widgets_plugin", group, targets)
    widgets: Registry[type] = Registry("widget", group=group)
    widgets.register("first", First)
    assert widgets.available() == ["first", "gone", "ordered"]
    assert widgets.get("ordered").__name__ == "OrderedDict"
    with pytest.raises(MissingDependencyError) as raised:
        widgets.get("gone")
    assert "entry point 'gone' of package 'widgets_plugin'" in str(raised.value)
    assert "needs the missing package 'crabray_test_gone'" in str(raised.value)


def test_an_entry_point_cannot_take_a_shipped_name(installed: Path) -> None:
    declare(installed, "greedy_plugin", "crabray.backends", {"local": "greedy:LocalBackend"})
    registry = backends._BACKENDS.copy()
    registry.get("local")  # loaded or not, the shipped name is taken
    with pytest.raises(DuplicateNameError) as raised:
        registry.available()
    assert "greedy_plugin" in str(raised.value) and "crabray.backends.local" in str(raised.value)


def test_register_agent_by_name_sets_the_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_registry, "_AGENTS", agent_registry._AGENTS.copy())

    @register_agent("idle")
    class IdleAgent(Agent):
        def reset(self, brief: object) -> None:
            pass

        def step(self, observed: object) -> object:
            raise NotImplementedError

    assert IdleAgent.kind == "idle"
    assert type(create_agent(AgentSpec(name="i", kind="idle"))) is IdleAgent
    with pytest.raises(DuplicateNameError):
        register_agent("oracle")(IdleAgent)
    with pytest.raises(ConfigError, match=r"agent 'x' has unknown kind 'nope'; known: .*idle"):
        create_agent(AgentSpec(name="x", kind="nope"))


class NotesFormat(SuiteFormat):
    """Suites of ``.notes`` files; declares the backend option only."""

    options = frozenset({"backend"})
    default_backend = "local"

    def detect(self, path: Path) -> bool:
        return path.suffix == ".notes"

    def load(self, path: Path, **options: str) -> Suite:
        raise NotImplementedError


@pytest.fixture
def notes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(format_base, "_FORMATS", format_base._FORMATS.copy())
    register_format("notes")(NotesFormat)


def test_a_format_that_declares_no_index_option_refuses_index(notes: None, tmp_path: Path) -> None:
    suite = tmp_path / "s.notes"
    suite.write_text("")
    assert resolve_suite(suite).format == "notes"
    assert resolve_suite(suite, backend="docker").backend == "docker"
    with pytest.raises(ConfigError) as raised:
        resolve_suite(suite, index=suite)
    assert raised.value.field == "--index"
    assert "notes suites take no index option" in str(raised.value)
    with pytest.raises(ConfigError, match="take no base-image option"):
        resolve_suite(suite, "notes", base_image="img")


def test_a_misspelt_option_is_an_error_when_the_format_is_defined() -> None:
    with pytest.raises(TypeError, match="unknown suite options \\['indx'\\]"):

        class Typo(SuiteFormat):
            options = frozenset({"indx"})  # type: ignore[arg-type]

            def detect(self, path: Path) -> bool:
                return False

            def load(self, path: Path, **options: str) -> Suite:
                raise NotImplementedError


def test_a_default_backend_needs_the_backend_option() -> None:
    """A format that picks a backend must let the user pick another; one that takes the
    option without a default (python suites) replaces its suites' own backends."""
    source = textwrap.dedent(
        """
        class DefaultOnly(SuiteFormat):
            default_backend = "local"
        """
    )
    with pytest.raises(TypeError, match="a format with a default_backend takes the 'backend'"):
        exec(source, {"SuiteFormat": SuiteFormat})
