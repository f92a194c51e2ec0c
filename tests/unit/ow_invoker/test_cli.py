"""Every subcommand is reachable from `ow-invoker` / `python -m ow_invoker` and has --help."""

import pytest

from ow_invoker.cli import SUBCOMMANDS, build_parser


def test_every_subcommand_is_registered():
    parser = build_parser()
    choices = next(a for a in parser._actions if a.dest == "command").choices
    assert set(choices) == set(SUBCOMMANDS)


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_help(command, capsys):
    from ow_invoker.cli import main

    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    assert "usage: ow-invoker " + command in capsys.readouterr().out


def test_bad_configuration_is_one_clear_line(capsys):
    from ow_invoker.cli import main

    assert main(["run", "--policy", "lifo"]) == 2
    err = capsys.readouterr().err
    assert "unknown policy 'lifo'" in err and "Traceback" not in err


def test_an_unknown_action_user_is_one_clear_line(capsys):
    from ow_invoker.cli import main

    assert main(["run", "--action-user", "no-such-user-for-ow"]) == 2
    err = capsys.readouterr().err
    assert err == "ow-invoker run: action user 'no-such-user-for-ow' does not exist\n"
