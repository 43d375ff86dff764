"""The exit codes of every ``fitgate`` command."""

#: The deployment fits (Fits or Tight), or the command did what it was asked.
EXIT_FITS = 0
#: Unknown (``plan``, ``recommend``, ``plan-pd``): a setting vLLM takes or an architecture that fitgate does not
#: size. Never a denial (the first rule), so the same status as Fits; the verdict and the reason say what was not sized.
EXIT_UNKNOWN = 0
#: It does not fit (DoesNotFit), or nothing holds the workload.
EXIT_DOES_NOT_FIT = 1
#: Bad input: one line on stderr naming the field, the value and what is accepted; never a traceback.
EXIT_USAGE = 2
#: The exit status of a command whose reader went away (``fitgate catalog list | head -2``): what a shell
#: reports for a Unix tool ended by SIGPIPE, 128 + 13.
EXIT_CLOSED_PIPE = 141
#: A bug: one line naming the exception (``FITGATE_DEBUG=1`` for a traceback); BSD's ``EX_SOFTWARE``.
EXIT_INTERNAL = 70
