"""The project's commands (mlcheck.commands.report, mlcheck.commands.baseline) run in this process, as a test reads
them: their exit status and what they printed."""

from mlcheck.commands import report


def run_main(capsys, main, *args):
    """(exit status, stdout, stderr) of a command's `main(args)`."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def run_report(capsys, *args):
    """(exit status, stdout, stderr) of mlcheck.commands.report with `args`."""
    return run_main(capsys, report.main, *args)


def one_line_error(capsys, main, *args):
    """The stderr of `main(args)`, which must refuse them the project's way: exit status 2, nothing
    on stdout, one line on stderr that starts with the command's name (`mlcheck.commands.report: error: `)."""
    code, out, err = run_main(capsys, main, *args)
    assert code == 2 and out == ''
    assert err.count('\n') == 1 and err.startswith(f'{main.__module__}: error: ')
    return err
