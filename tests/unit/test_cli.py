"""Every subcommand is reachable from `ow-invoker` / `python -m invoker` and has --help."""

import subprocess
import sys

import pytest

from invoker.cli import SUBCOMMANDS, build_parser


def test_every_subcommand_is_registered():
    parser = build_parser()
    choices = next(a for a in parser._actions if a.dest == "command").choices
    assert set(choices) == set(SUBCOMMANDS)


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_help(command, capsys):
    from invoker.cli import main

    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    assert "usage: ow-invoker " + command in capsys.readouterr().out


def test_python_dash_m():
    out = subprocess.run(
        [sys.executable, "-m", "invoker", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "standalone" in out.stdout


def test_bad_configuration_is_one_clear_line(capsys):
    from invoker.cli import main

    assert main(["run", "--policy", "lifo"]) == 2
    err = capsys.readouterr().err
    assert "unknown policy 'lifo'" in err and "Traceback" not in err
