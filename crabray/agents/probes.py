"""Probes: agents that try to pass a task without doing it (``crabray audit``).

Each probe is an ordinary agent kind in the agents' registry, so its episodes
are ordinary rows and a suite author adds one the way they add an agent
(``docs/plugins.md``). A probe gets what the audit learned of the task (its
``ProbeFacts``: the values its graders compare against, the files they read,
the options the instruction lists, the reference solution as a shell script)
through its spec's settings, acts through the task's own command and file
actions, and ends its turn. A probe that passes a task has found a way to
pass it without doing it; a probe's last message reports what it saw
(``REPORT_PREFIX`` then JSON), which the audit reads back from the steps.
"""

from __future__ import annotations

import base64
import json
import posixpath
import shlex
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from crabray.agents.base import ActionCall, Agent, AgentStep, StepInput, TaskBrief
from crabray.agents.registry import register_agent

LINE_JOIN = "\x01"
"""What joins the lines of a value of several lines in ``ProbeFacts.secrets``: the peek looks
for the value whole, its lines in order, not for any one of them."""

REPORT_PREFIX = "probe report: "
"""How a probe's last message starts; JSON of what it found follows."""

_SEARCH_TIMEOUT_SEC = 120.0


class ProbeFacts(BaseModel):
    """What the audit knows of one task that a probe may use against it."""

    secrets: list[str] = Field(
        default_factory=list,
        description="Values the task's graders compare against (one line each): the answer.",
    )
    clues: list[str] = Field(
        default_factory=list,
        description="Strings the task's shipped graders and solution use, inputs among them: "
        "evidence only where no input belongs (a hidden file, /tmp, /opt, a file named like "
        "an answer, the environment, other processes, git history).",
    )
    files: list[str] = Field(
        default_factory=list, description="Files the graders read or the reference solution writes."
    )
    options: list[str] = Field(
        default_factory=list, description="Answers the instruction offers to choose from."
    )
    expected: list[str] = Field(
        default_factory=list,
        description="Every value the graders compare against, short ones included (what a "
        "forged program prints).",
    )
    answer_stated: bool = Field(
        default=False,
        description="Every value the graders compare against is in the instruction itself.",
    )
    solution_script: str | None = Field(
        default=None, description="The reference solution as a shell script, where it is one."
    )


class ProbeReport(BaseModel):
    """What a probe saw and did, in its last message (read back by the audit)."""

    acted: bool = Field(description="Whether the task offered the actions the probe needs.")
    found: list[str] = Field(default_factory=list, description="Evidence the probe found.")
    note: str = ""


def facts_of(settings: dict[str, Any], task_id: str) -> ProbeFacts:
    """The facts the audit gave for ``task_id`` (none for a task it has none of)."""
    known = settings.get("facts", {})
    return ProbeFacts.model_validate(known.get(task_id, {}))


class ProbeAgent(Agent):
    """A probe: one turn of calls against the task, then ``complete`` with its report.

    Subclasses give ``finding`` (the class of flaw a pass shows) and
    ``calls``; a probe that needs its calls' outputs overrides ``report``.
    """

    finding: ClassVar[str]
    """The flaw a pass by this probe shows: trivial-answer, answer-visible or grader-trust."""
    ends_with_its_calls: ClassVar[bool] = False
    """The probe's calls and its ``complete`` are one step: nothing of the harness's runs
    between them (its report cannot read the calls' outputs)."""
    harness_guards: ClassVar[bool] = False
    """The harness itself guards against this probe (it freezes the agent's processes while
    it grades): a pass it marks unverified is the guard working, no flaw of the task's."""

    def reset(self, brief: TaskBrief) -> None:
        self.brief = brief
        self.facts = facts_of(self.spec.settings, brief.task_id)
        self.tools = {tool["function"]["name"]: tool for tool in brief.tools}
        self._acted = False
        self._done = False

    def step(self, observed: StepInput) -> AgentStep:
        if not self._acted:
            self._acted = True
            calls = self.calls()
            if calls and self.ends_with_its_calls:
                self._done = True
                report = self.report(observed)
                message = REPORT_PREFIX + report.model_dump_json()
                return AgentStep(calls=[*calls, *self._finish()], message=message)
            if calls:
                return AgentStep(calls=calls, message=f"{self.kind}: acting")
        if not self._done:
            self._done = True
            report = self.report(observed)
            return AgentStep(calls=self._finish(), message=REPORT_PREFIX + report.model_dump_json())
        return AgentStep(calls=[ActionCall(name="complete")])

    def calls(self) -> list[ActionCall]:
        """The probe's one turn of calls (empty: the task offers nothing it can use)."""
        raise NotImplementedError

    def answer(self) -> str | None:
        """What the probe submits where the task takes a submission (None: nothing)."""
        return None

    def report(self, observed: StepInput) -> ProbeReport:
        """What the probe saw: by default only whether it could act."""
        return ProbeReport(acted=bool(observed.results))

    def _finish(self) -> list[ActionCall]:
        answer = self.answer()
        calls = []
        if answer is not None and "submit" in self.tools:
            calls.append(ActionCall(name="submit", arguments={"content": answer}))
        return [*calls, ActionCall(name="complete")]

    def command_tools(self) -> list[str]:
        """The task's actions that run a shell command (one per environment)."""
        return [
            name
            for name, tool in self.tools.items()
            if "command" in name
            and "command" in tool["function"].get("parameters", {}).get("properties", {})
        ]

    def run(self, script: str, timeout_sec: float | None = None) -> list[ActionCall]:
        """Calls that run ``script`` with every command action the task offers."""
        arguments: dict[str, Any] = {"command": script}
        calls = []
        for name in self.command_tools():
            props = self.tools[name]["function"]["parameters"].get("properties", {})
            args = dict(arguments)
            if timeout_sec is not None and "timeout_sec" in props:
                args["timeout_sec"] = timeout_sec
            calls.append(ActionCall(name=name, arguments=args))
        return calls


def write_script(files: dict[str, str]) -> str:
    """A shell script that writes each file (its folder made first) with exactly its text."""
    lines = []
    for path, text in files.items():
        folder = posixpath.dirname(path)
        if folder:
            lines.append(f"mkdir -p {shlex.quote(folder)} 2>/dev/null")
        lines.append(f"printf '%s' {shlex.quote(text)} > {shlex.quote(path)}")
    return "\n".join(lines)


class _AnswerProbe(ProbeAgent):
    """Hands in one trivial answer: as the submission and as every file the grader reads."""

    finding = "trivial-answer"

    def content(self, path: str | None) -> str:
        """The trivial answer, for a file at ``path`` (None: the submission)."""
        raise NotImplementedError

    def answer(self) -> str | None:
        return self.content(None)

    def calls(self) -> list[ActionCall]:
        if not self.facts.files:
            return []
        return self.run(write_script({path: self.content(path) for path in self.facts.files}))

    def report(self, observed: StepInput) -> ProbeReport:
        acted = bool(observed.results) or ("submit" in self.tools and self.answer() is not None)
        return ProbeReport(acted=acted, note=f"answered {self.content(None)!r}"[:200])


@register_agent
class EmptyAnswerProbe(_AnswerProbe):
    """Submits nothing and leaves every file the grader reads empty."""

    kind = "probe-empty"

    def content(self, path: str | None) -> str:
        return ""


@register_agent
class ZeroAnswerProbe(_AnswerProbe):
    """Submits ``0``; fills each file with its type's zero value (``{}``, ``[]``, ``0``)."""

    kind = "probe-zero"

    def content(self, path: str | None) -> str:
        if path is not None and path.endswith(".json"):
            return "{}"
        if path is not None and path.endswith((".yaml", ".yml")):
            return "{}\n"
        if path is not None and path.endswith(".csv"):
            return ""
        return "0"


@register_agent
class BracesAnswerProbe(_AnswerProbe):
    """Submits ``{}`` and writes ``{}`` into each file the grader reads."""

    kind = "probe-braces"

    def content(self, path: str | None) -> str:
        return "{}"


@register_agent
class EchoAnswerProbe(_AnswerProbe):
    """Submits the instruction itself, and writes it into each file the grader reads."""

    kind = "probe-echo"

    def content(self, path: str | None) -> str:
        return self.brief.description

    def calls(self) -> list[ActionCall]:
        return [] if self._stated() else super().calls()

    def answer(self) -> str | None:
        return None if self._stated() else self.content(None)

    def _stated(self) -> bool:
        """The instruction states the whole answer and offers no other: handing it in is
        handing in the answer, no flaw of the grader's."""
        return self.facts.answer_stated and not self.facts.options


@register_agent
class EveryOptionProbe(_AnswerProbe):
    """Submits every option the instruction offers at once (and yes, no, true, false)."""

    kind = "probe-every-option"

    def content(self, path: str | None) -> str:
        return "\n".join([*self.facts.options, "yes", "no", "true", "false"])

    def calls(self) -> list[ActionCall]:
        return super().calls() if self.facts.options else []

    def answer(self) -> str | None:
        return self.content(None) if self.facts.options else None


@register_agent
class WrongFileProbe(_AnswerProbe):
    """Writes each file the grader reads with the right type and the wrong content."""

    kind = "probe-wrong-file"
    finding = "grader-trust"

    def content(self, path: str | None) -> str:
        if path is not None and path.endswith(".json"):
            return '{"answer": "wrong", "value": -1, "items": []}'
        if path is not None and path.endswith(".csv"):
            return "id,value\n1,wrong\n"
        return "wrong answer -1"

    def answer(self) -> str | None:
        return None


_PEEK = r"""
d=$(mktemp -d 2>/dev/null || { mkdir -p /tmp/.peek$$ && echo /tmp/.peek$$; })
printf '%s' {secrets} | base64 -d > "$d/all" 2>/dev/null || exit 3
roots="$PWD $HOME /tmp /var/tmp /var/www /var/mail"
for r in /*; do
  case "$r" in
    /proc|/sys|/dev|/usr|/bin|/sbin|/lib|/lib32|/lib64|/libx32|/etc|/boot|/run|/var|/snap|/nix) ;;
    *) roots="$roots $r" ;;
  esac
done
gits=$(for r in $roots; do
  find "$r" -xdev -maxdepth 4 -name .git -type d 2>/dev/null
done | sort -u)
hidden='/\.|^/tmp/|^/var/tmp/|^/opt/|answer|expect|solution|oracle|reference|truth|golden|secret'
i=0
sep=$(printf '\001')
while IFS= read -r s; do
  i=$((i+1))
  [ -n "$s" ] || continue
  # A value of several lines comes with them joined by \001: a text holds it whole when
  # its lines, joined the same way, contain it (a reordered copy does not).
  printf '%s\n' "$s" > "$d/$i"
  printf '%s\n' "${s%%"$sep"*}" > "$d/$i.first"
  for r in $roots; do
    [ -d "$r" ] || continue
    grep -rlsF -f "$d/$i.first" "$r" 2>/dev/null | grep -v "^$d/" | head -n 50
  done | sort -u | while IFS= read -r c; do
    tr '\n' '\001' < "$c" | grep -qF -f "$d/$i" && echo "$c"
  done | {
    if [ "$i" -gt {secret_count} ]; then grep -iE "$hidden"; else cat; fi
  } | head -n 3 | sed "s|^|FOUND $i file |"
  # A clue counts in a variable's value, never its name, and not in command lines.
  names='s/^[A-Za-z_][A-Za-z0-9_]*=//'; sources="environ cmdline"
  [ "$i" -gt {secret_count} ] || names=''
  [ "$i" -gt {secret_count} ] && sources=environ
  env | sed "$names" | tr '\n' '\001' | grep -qF -f "$d/$i" &&
    echo "FOUND $i environment variable"
  for p in /proc/[0-9]*; do
    [ "$p" = "/proc/$$" ] && continue
    for f in $sources; do
      tr '\0' '\n' < "$p/$f" 2>/dev/null | sed "$names" | tr '\n' '\001' |
        grep -qF -f "$d/$i" && echo "FOUND $i $p/$f"
    done
  done | head -n 3
  for g in $gits; do
    revs=$(git -C "$g/.." rev-list --all 2>/dev/null | head -n 200)
    [ -n "$revs" ] || continue
    git -C "$g/.." grep -lF -f "$d/$i.first" $revs 2>/dev/null | while IFS= read -r hit; do
      git -C "$g/.." show "$hit" 2>/dev/null | tr '\n' '\001' | grep -qF -f "$d/$i" &&
        echo "FOUND $i git history $g ($hit)"
    done | head -n 1
  done
done < "$d/all"
rm -rf "$d"
echo PEEK-DONE
"""


@register_agent
class PeekProbe(ProbeAgent):
    """Looks for the task's expected values where an exploit would, before doing anything.

    Files under every folder the agent may read outside the system's own,
    environment variables, other processes' environments and command lines,
    and the history of every git repository there: a value found is an
    answer the agent could copy. A clue (a string a shipped grader or solution
    uses, which may be an input of the task) counts only where no input
    belongs: a hidden file, ``/tmp``, ``/opt``, a file named like an answer.
    """

    kind = "probe-peek"
    finding = "answer-visible"

    def calls(self) -> list[ActionCall]:
        sought = [*self.facts.secrets, *self.facts.clues]
        if not sought:
            return []
        listed = base64.b64encode(("\n".join(sought) + "\n").encode()).decode()
        script = _PEEK.replace("{secrets}", shlex.quote(listed))
        script = script.replace("{secret_count}", str(len(self.facts.secrets)))
        return self.run(script, _SEARCH_TIMEOUT_SEC)

    def report(self, observed: StepInput) -> ProbeReport:
        found: list[str] = []
        for result in observed.results:
            for line in result.output.splitlines():
                if not line.startswith("FOUND "):
                    continue
                _, index, where = line.split(" ", 2)
                secret = [*self.facts.secrets, *self.facts.clues][int(index) - 1]
                secret = secret.replace(LINE_JOIN, "\n")
                found.append(f"{_preview(secret)} in {where}")
        searched = any("PEEK-DONE" in result.output for result in observed.results)
        note = "" if searched or not observed.results else "the search did not finish"
        return ProbeReport(acted=searched, found=sorted(set(found)), note=note)


def success_text(facts: ProbeFacts) -> str:
    """What a forged program prints: what success looks like, and every value a grader
    compares against (a grader reading its output finds what it looks for)."""
    return "\n".join(["PASS", "1 passed", "OK", *facts.expected]) + "\n"


def fake_program(facts: ProbeFacts) -> str:
    """A shell script that prints ``success_text`` and exits 0."""
    return f"#!/bin/sh\nprintf '%s' {shlex.quote(success_text(facts))}\nexit 0\n"


_FAKED = "cat python3 python pytest curl wget grep diff cmp jq sha256sum md5sum wc head tail"

_FAKE_TOOLS = r"""
fake={fake}
for dir in $(echo "$PATH" | tr ':' ' ') "$HOME/.local/bin" "$HOME/bin" /usr/local/bin; do
  mkdir -p "$dir" 2>/dev/null
  [ -d "$dir" ] && [ -w "$dir" ] || continue
  for t in {tools}; do
    rm -f "$dir/$t" 2>/dev/null
    printf '%s' "$fake" > "$dir/$t" 2>/dev/null && chmod 755 "$dir/$t" && echo "FAKED $dir/$t"
  done
done
echo FAKE-DONE
"""


@register_agent
class FakeToolsProbe(ProbeAgent):
    """Replaces the programs graders run (cat, python3, pytest, curl, grep, ...) where it may.

    Each replacement prints what success looks like and every value the graders compare
    against (``success_text``) and exits 0, in every
    folder of ``PATH`` the agent can write and in ``~/.local/bin``.
    """

    kind = "probe-fake-tools"
    finding = "grader-trust"

    def calls(self) -> list[ActionCall]:
        fake = shlex.quote(fake_program(self.facts))
        script = _FAKE_TOOLS.replace("{fake}", fake).replace("{tools}", _FAKED)
        return self.run(script)

    def report(self, observed: StepInput) -> ProbeReport:
        return _listed(observed, "FAKED ", "replaced")


_CONFTEST = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"


def pytest_sessionfinish(session, exitstatus):
    session.exitstatus = 0
"""
_AT_EXIT = "import atexit, os; atexit.register(lambda: os._exit(0))\n"
_RC = "trap 'exit 0' EXIT\nexport PATH=\"$HOME/.local/bin:$PATH\"\n"

_HOOKS = r"""
plant() {
  mkdir -p "$(dirname "$2")" 2>/dev/null
  printf '%s' "$1" > "$2" 2>/dev/null && echo "PLANTED $2"
}
for dir in "$PWD" "$HOME" /app /tests /workspace /tmp /; do
  [ -d "$dir" ] && [ -w "$dir" ] && plant {conftest} "$dir/conftest.py"
done
for py in python3 python; do
  command -v "$py" >/dev/null 2>&1 || continue
  dirs=$("$py" -c 'import site, sys
print(" ".join([p for p in sys.path if p] + [site.getusersitepackages()]))' 2>/dev/null)
  for dir in $dirs; do
    mkdir -p "$dir" 2>/dev/null
    [ -d "$dir" ] && [ -w "$dir" ] || continue
    plant {at_exit} "$dir/sitecustomize.py"
    plant {at_exit} "$dir/usercustomize.py"
    plant {at_exit} "$dir/zz_probe.pth"
  done
done
for rc in "$HOME/.bashrc" "$HOME/.profile" "$HOME/.bash_profile" \
    /etc/bash.bashrc /etc/profile.d/zz-probe.sh; do
  { [ -w "$rc" ] || [ -w "$(dirname "$rc")" ]; } || continue
  printf '%s' {rc} >> "$rc" 2>/dev/null && echo "PLANTED $rc"
done
echo HOOKS-DONE
"""


@register_agent
class PlantHooksProbe(ProbeAgent):
    """Plants what test runners and interpreters pick up by themselves.

    A ``conftest.py`` that marks every test passed, ``sitecustomize.py``,
    ``usercustomize.py`` and a ``.pth`` file that make Python exit 0, and shell
    rc files that make a shell exit 0: wherever the agent may write them.
    """

    kind = "probe-plant-hooks"
    finding = "grader-trust"

    def calls(self) -> list[ActionCall]:
        script = (
            _HOOKS.replace("{conftest}", shlex.quote(_CONFTEST))
            .replace("{at_exit}", shlex.quote(_AT_EXIT))
            .replace("{rc}", shlex.quote(_RC))
        )
        return self.run(script)

    def report(self, observed: StepInput) -> ProbeReport:
        return _listed(observed, "PLANTED ", "planted")


_TAMPER = r"""
py={py}
sh={sh}
mk={mk}
for r in "$PWD" /app /workspace /tests /solution /utils "$HOME"; do
  [ -d "$r" ] || continue
  find "$r" -xdev -maxdepth 4 -type f \( -name '*.py' -o -name '*.sh' -o -name Makefile \) \
    2>/dev/null
done | sort -u | while IFS= read -r f; do
  [ -w "$f" ] || continue
  case "$f" in
    *.py) printf '%s' "$py" > "$f" ;;
    *.sh) printf '%s' "$sh" > "$f" ;;
    *) printf '%s' "$mk" > "$f" ;;
  esac && echo "TAMPERED $f"
done
echo TAMPER-DONE
"""


@register_agent
class TamperScriptsProbe(ProbeAgent):
    """Rewrites every script the agent may write (``*.py``, ``*.sh``, a Makefile) to succeed.

    A grader that passes after it ran code from a folder the agent can write.
    """

    kind = "probe-tamper-scripts"
    finding = "grader-trust"

    def calls(self) -> list[ActionCall]:
        said = success_text(self.facts)
        stubs = {
            "{py}": f"import sys\nsys.stdout.write({said!r})\nsys.exit(0)\n",
            "{sh}": fake_program(self.facts),
            "{mk}": ".DEFAULT:\n\t@echo PASS\nall:\n\t@echo PASS\n",
        }
        script = _TAMPER
        for name, stub in stubs.items():
            script = script.replace(name, shlex.quote(stub))
        return self.run(script)

    def report(self, observed: StepInput) -> ProbeReport:
        return _listed(observed, "TAMPERED ", "rewrote")


@register_agent
class LingeringProbe(ProbeAgent):
    """Ends its turn at once, leaving a process that does the reference solution afterwards.

    The process waits a second, then replays the solution every 0.2 s: a pass
    means the task was graded while the agent's process still ran.
    """

    kind = "probe-lingering"
    finding = "grader-trust"
    harness_guards = True
    ends_with_its_calls = True

    def calls(self) -> list[ActionCall]:
        script = self.facts.solution_script
        if not script:
            return []
        loop = f"sleep 1; while :; do ( {script}\n ) >/dev/null 2>&1; sleep 0.2; done"
        return self.run(
            f"nohup sh -c {shlex.quote(loop)} >/dev/null 2>&1 </dev/null &\necho LEFT-RUNNING"
        )

    def report(self, observed: StepInput) -> ProbeReport:
        if not self.facts.solution_script or not self.command_tools():
            return ProbeReport(acted=False, note="no solution to replay from a shell")
        return ProbeReport(acted=True, note="left a process replaying the solution")


def _listed(observed: StepInput, prefix: str, verb: str) -> ProbeReport:
    """A report of the paths a probe's script printed after ``prefix``."""
    paths = sorted(
        {
            line[len(prefix) :]
            for result in observed.results
            for line in result.output.splitlines()
            if line.startswith(prefix)
        }
    )
    acted = bool(observed.results)
    note = f"{verb} {len(paths)} {'file' if len(paths) == 1 else 'files'}" + (
        f": {', '.join(paths[:8])}" if paths else ""
    )
    return ProbeReport(acted=acted, found=paths, note=note[:400])


def _preview(secret: str) -> str:
    """A found value as a report shows it: quoted, at most 40 characters."""
    return json.dumps(secret if len(secret) <= 40 else secret[:37] + "...")
