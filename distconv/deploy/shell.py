"""A container's command line read as the programs on it read it: the one command a shell's
``-c`` string runs (:func:`shell_command`), and the variables an ``env`` or ``mpirun`` before
``distconv`` sets or removes for it (:func:`sets_variable`, :func:`removes_variable`).

Shared by :mod:`distconv.deploy.walk`, which reads a container's command line through it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection

from distconv.deploy.commands import SHELLS, past_wrappers, program_name
from distconv.deploy.env_options import env_removes

#: ``$$`` (a literal ``$``) or ``$(NAME)``, as the kubelet expands a container's command, args
#: and env values before the process (or its shell) sees them
KUBELET_REFERENCE = re.compile(r"\$\$|\$\(([^)]*)\)")
#: what a shell expands or acts on: a string holding one is no plain command line as written
SHELL_SYNTAX = re.compile(r"[\n$`\\*?\[\]~{}()<>|;&#!]")
#: what makes a value more or less than one word to the shell that reads it
_QUOTE_OR_SPACE = re.compile(r"[\s'\"]")
#: mpirun's options that set a variable for the ranks: ``-genv NAME VALUE`` (Hydra)
_MPI_ENV_OPTIONS = {"-env", "-genv", "--env", "--genv"}
#: ``NAME=value``: a variable the shell sets for the command after it
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: a shell string's first command when it only sets a variable to a plain word (``S=ps;``,
#: ``export S=ps &&``, on its own line): ``export`` where written, the name and its value
_LEADING_SET = re.compile(
    r"\s*(export[ \t]+)?([A-Za-z_]\w*)=([^\s;&|'\"$`\\()<>{}#*?\[\]~!]*)[ \t]*(?:;|&&|\n)"
)
#: a ``NAME=`` anywhere in a shell string: where it sets the variable again, only the running
#: shell knows which value a ``$NAME`` reads
_ANY_SET = re.compile(r"(?:^|[\s;&|(])([A-Za-z_]\w*)=")
#: the variables a shell sets itself as it starts, whatever its environment holds (sh and bash:
#: ``PPID``, ``PWD``, ``IFS``, ``OPTIND``; bash's ``OLDPWD``, ``SHLVL`` and its counters):
#: the pod's ``env`` value of one is not what ``$NAME`` reads
SHELL_OWN = frozenset(
    "PPID PWD OLDPWD IFS OPTIND SHLVL LINENO RANDOM SRANDOM SECONDS BASHPID BASH_SUBSHELL "
    "BASH_COMMAND BASH BASH_VERSION EPOCHSECONDS EPOCHREALTIME HISTCMD PS4".split()
)
#: the wrappers that start their command in an environment of their own, not the pod's
#: (:func:`_through_env`): sudo's ``env_reset``, on by default, doas (but for ``keepenv``),
#: and setpriv's ``--reset-env`` option
_RESETS_ENVIRONMENT = {"sudo", "doas", "--reset-env"}
#: the variables such a wrapper sets itself (the target user's, from the image's passwd),
#: whatever the pod's are, and the one it keeps of the pod's (``TERM``)
_RESET_SETS = frozenset({"HOME", "USER", "LOGNAME", "SHELL", "PATH", "MAIL"})
_RESET_KEEPS = "TERM"
#: what a ``$NAME`` whose value only the image knows is filled in with, around its name: the
#: checks' stand-in for a value only the cluster knows, which they take for any value
STAND_IN = "\x00"
#: a shell's ``$NAME``, ``${NAME}`` or ``${NAME:-WORD}`` (``-`` or ``+``, each with or without
#: ``:``; WORD plain; ``=`` would set NAME) not after a backslash: the name, the operator, WORD
_VARIABLE = re.compile(
    r"(?<!\\)\$(?:\{([A-Za-z_]\w*)(?:(:?[-+])([^{}$`'\"\\]*))?\}|([A-Za-z_]\w*))"
)


def fill_in_variables(
    script: str,
    known: dict[str, str | None],
    environment: Collection[str] | None = None,
    unsure: Collection[str] = (),
) -> str:
    """``script``, a shell's ``-c`` string, with the variables a shell fills in as one plain
    word filled in: its first commands that only set a variable to a plain word (``S=ps;
    exec distconv train --sync $S``, ``export S=ps;``) read, and those it exports kept as
    ``NAME=value`` words before the command after them, as the command's environment: one
    ``export`` names, or one of the container's ``environment`` (``DISTCONV_PSERVERS=;``
    empties the pod's variable; None: any name may be one, an ``envFrom`` may set it). A
    variable the shell only sets for itself is not the command's. Then each
    ``$NAME``/``${NAME}`` outside single quotes of a name they set or ``known`` (the
    container's variables of a plain value, less :data:`SHELL_OWN`; None: unset for sure)
    gives is replaced by that value, and so is a
    ``${NAME:-WORD}`` of such a name, as the shell reads it (:func:`_expanded`). A variable the
    rest of the string sets again, or that neither gives (a value only the cluster knows), is
    left as written: no guess. One of ``unsure``, which the shell may have or not (the pod's,
    behind sudo: :func:`_through_env`), is filled in only where it reads the same unset; else
    with :data:`STAND_IN`, a value no one but the image knows."""
    values = {name: value for name, value in known.items() if name not in SHELL_OWN}
    unsure = set(unsure)
    prefix = ""
    while (match := _LEADING_SET.match(script)) is not None:
        exported, name, value = match.groups()
        values[name] = value
        unsure.discard(name)
        if exported or environment is None or name in environment:
            prefix += f"{name}={value} "
        script = script[match.end() :].lstrip(" \t")
    for name in _ANY_SET.findall(script):
        values.pop(name, None)

    def value(match: re.Match) -> str:
        name, operator, word = match.group(1) or match.group(4), match.group(2), match.group(3)
        if name not in values:
            return match.group(0)
        reading = _expanded(values[name], operator or "", word)
        if name in unsure and reading != _expanded(None, operator or "", word):
            return f"{STAND_IN}{name}{STAND_IN}"
        return reading

    return prefix + "".join(
        piece if piece.startswith("'") else _VARIABLE.sub(value, piece)
        for piece in _QUOTED.split(script)
    )


def _expanded(value: str | None, operator: str, word: str | None) -> str:
    """What the shell fills in for ``${NAME<operator><word>}`` of a variable set to ``value``
    (None: unset): ``-`` gives the value, ``+`` the word; with ``:``, an empty value is as if
    unset (``${S:-ps}`` of an empty S gives ``ps``, ``${S:+x}`` nothing)."""
    unset = value is None or (operator.startswith(":") and not value)
    if operator.endswith("+"):
        return "" if unset else word or ""
    return (word or "") if unset else value


#: a quoted string, kept as a piece by ``split``: a single-quoted one, in which a shell fills
#: in nothing, or a double-quoted one, in which it fills in variables
_QUOTED = re.compile(r"""("(?:\\.|[^"\\])*"|'[^']*')""")


def shell_command(
    argv: list[str],
    plain: set[str],
    known: dict[str, str] | None = None,
    environment: Collection[str] | None = None,
) -> list[str] | None:
    """The words of the one command that ``argv``, a shell's ``-c`` string, runs (``exec`` read
    past), split as the shell splits them, after the wrappers that start the shell
    (``tini -- sh -c "..."``: :func:`~distconv.deploy.commands.past_wrappers`), which stay
    before them; None where ``argv`` runs no shell, passes words after the string (``sh -c
    "..." sh --health-port 8080``: its ``$0``, ``$1``), or its string is more than one
    command as written: another command before it (``cd /x;``) or something the
    shell would expand or act on (``$HOME``, a glob, a redirection), which only the running
    shell knows. A variable set for the command (``DISTCONV_JOB_ID=j exec ...``) stays a
    word (:func:`sets_variable`). A ``$(NAME)`` of a variable in ``plain`` stays for the
    checks to fill in, as the kubelet does before the shell starts; a ``$NAME`` of a plain value
    the string sets first or ``known`` gives is filled in (:func:`fill_in_variables`, whose
    ``environment`` are the names the shell exports). Bash's ``exec -c``, which starts the
    command with an empty environment, is read as ``env -i``."""
    at = past_wrappers(argv)
    shell = program_name(argv[at]) if at < len(argv) else None
    script = _command_string(argv[at + 1 :], shell == "bash") if shell in SHELLS else None
    if script is None:
        return None
    values, environment, unsure = _through_env(argv[:at], known or {}, environment)
    script = fill_in_variables(script, values, environment, unsure)
    # YAML's block scalars (`- |`, `- >`) end the string in a newline: no second command
    script = script.rstrip("\n")
    written = KUBELET_REFERENCE.sub(lambda m: "" if m.group(1) in plain else "$", script)
    if SHELL_SYNTAX.search(written):
        return None
    try:
        words = shlex.split(script)
    except ValueError:  # an unbalanced quote: the shell refuses it
        return None
    command = _past_exec(words, shell)
    return None if command is None else [*argv[:at], *command]


def _through_env(
    wrappers: list[str], known: dict[str, str], environment: Collection[str] | None
) -> tuple[dict[str, str | None], Collection[str] | None, frozenset[str]]:
    """``known``, ``environment`` and ``unsure`` (:func:`fill_in_variables`) as the shell
    started behind ``wrappers`` sees them: an ``env NAME=value`` among them gives NAME that
    value (one plain word; another is left to the running shell), ``env -u NAME`` and ``env
    -i`` take the pod's away (``env S=pserver sh -c "... --sync $S"`` syncs through the
    shards). Behind ``sudo``, ``doas`` or ``setpriv --reset-env``, which start their command in
    an environment of their own (sudo's ``env_reset``, doas's default), what the shell keeps
    only the image (its sudoers, doas.conf) says (:func:`_behind_reset`): any name may be
    exported, and what a wrapper after it gives is known."""
    unsure: frozenset[str] = frozenset()
    resets = [i for i, word in enumerate(wrappers) if program_name(word) in _RESETS_ENVIRONMENT]
    values: dict[str, str | None] = dict(known)
    if resets:
        values, unsure = _behind_reset(wrappers[: resets[-1] + 1], known, environment)
        wrappers, environment = wrappers[resets[-1] + 1 :], None
    given = {w.split("=", 1)[0] for w in wrappers if _ASSIGNMENT.match(w)}
    values = {
        n: v for n, v in values.items() if n not in given and not removes_variable(wrappers, n)
    }
    for name in given:
        value = sets_variable(wrappers, name)
        if value and not SHELL_SYNTAX.search(value) and not _QUOTE_OR_SPACE.search(value):
            values[name] = value
    if environment is not None:
        environment = {n for n in environment if not removes_variable(wrappers, n)} | given
    return values, environment, unsure - given


def _behind_reset(
    wrappers: list[str], known: dict[str, str], environment: Collection[str] | None
) -> tuple[dict[str, str | None], frozenset[str]]:
    """The values and ``unsure`` (:func:`_through_env`) of the command that the last of
    ``wrappers``, one that resets the environment, starts. Each variable that wrapper is
    started with, the pod's or one an ``env`` before it gives (``env S=b sudo -E``), may be
    kept behind sudo or doas (``unsure``) and is unset behind ``setpriv --reset-env``; one an
    ``env`` before it takes away (``env -u S sudo``) is unset either way; ``TERM`` is kept;
    those the wrapper sets itself (:data:`_RESET_SETS`) are values only the image knows."""
    before = wrappers[:-1]
    values, _, unsure = _through_env(before, known, environment)
    given = {w.split("=", 1)[0] for w in before if _ASSIGNMENT.match(w)}
    for name in {*known, *given} - values.keys():  # taken away, or more than one word
        unknown = sets_variable(before, name) is not None
        values[name] = f"{STAND_IN}{name}{STAND_IN}" if unknown else None
    kept = {n for n, v in values.items() if v is not None} - _RESET_SETS - {_RESET_KEEPS}
    if wrappers[-1] == "--reset-env":
        values.update(dict.fromkeys(kept))
        unsure &= {_RESET_KEEPS}
    else:
        unsure |= kept
    values.update({n: f"{STAND_IN}{n}{STAND_IN}" for n in _RESET_SETS})
    return values, unsure - _RESET_SETS


def _command_string(args: list[str], bash: bool) -> str | None:
    """The string a shell given options ``args`` runs: ``-c`` among them (``-c``, ``-lc``,
    ``-ce``, ``-e -c``, ``-o pipefail -c``; bash's long ones first, ``--login -c``), then the
    string, the only word after them; None without ``-c``, or with words after the string
    (its ``$0``, ``$1``...: only the running shell knows what reads them)."""
    at, command = 0, False
    while at < len(args) and args[at][:1] in "-+" and len(args[at]) > 1:
        word = args[at]
        at += 1
        if word == "--":
            break
        if word.startswith("--"):  # bash's --login, --norc; --rcfile FILE takes a value
            if not bash:  # dash: "Illegal option --"
                return None
            at += word in _BASH_VALUED
            continue
        command = command or (word[0] == "-" and "c" in word)
        at += sum(letter in "oO" for letter in word[1:])  # -o NAME, bash's -O NAME
    return args[at] if command and len(args) == at + 1 else None


#: bash's long options whose value is the next word
_BASH_VALUED = {"--rcfile", "--init-file"}


def _past_exec(words: list[str], shell: str) -> list[str] | None:
    """``words`` (``NAME=v ... exec [OPTIONS] COMMAND``) as the command ``exec`` runs: bash's
    ``exec -c`` empties its environment, the variables set before it too (read as ``env -i
    COMMAND``), ``-a NAME`` and ``-l`` change only its ``argv[0]``; None where another shell
    is given an option there, which dash runs as a command (``exec: -c: not found``) and only
    the shell in the image knows."""
    assigned = 0
    while assigned < len(words) and _ASSIGNMENT.match(words[assigned]):
        assigned += 1
    if words[assigned : assigned + 1] != ["exec"]:
        return words
    rest, cleared, at = words[assigned + 1 :], False, 0
    while at < len(rest) and rest[at].startswith("-") and rest[at] != "-":
        word = rest[at]
        at += 1
        if shell != "bash":
            return None
        if word == "--":
            break
        for i, letter in enumerate(word[1:], 2):
            if letter not in "cla":  # bash: "exec: -x: invalid option", the command not run
                return None
            cleared = cleared or letter == "c"
            if letter == "a":  # its value: the rest of the word, or the next word
                at += 0 if word[i:] else 1
                break
    command = rest[at:]
    return ["env", "-i", *command] if cleared else [*words[:assigned], *command]


def sets_variable(argv: list[str], name: str) -> str | None:
    """The value ``argv`` gives variable ``name`` for the distconv it starts, as written; None
    where it gives none. A ``NAME=value`` word before ``distconv`` (a shell's ``NAME=v exec
    distconv ...``, ``env NAME=v distconv ...``, Open MPI's ``mpirun -x NAME=v``), or Hydra's
    ``mpirun -genv NAME VALUE``; the last one wins, as it does for ``env``, and an ``env -u
    NAME`` after it (:func:`removes_variable`) leaves none."""
    value = None
    for i, word in enumerate(argv):
        program = word.rsplit("/", 1)[-1]
        if program == "distconv":
            break
        if program == "env" and env_removes(argv[i + 1 :], name):
            value = None  # a later env -u NAME (-i) drops what an earlier one set
        elif word.startswith(f"{name}="):
            value = word.split("=", 1)[1]
        elif word == name and i and argv[i - 1] in _MPI_ENV_OPTIONS and i + 1 < len(argv):
            value = argv[i + 1]
    return value


def removes_variable(argv: list[str], name: str) -> bool:
    """Whether an ``env`` in ``argv`` starts ``distconv`` without the pod's variable ``name``:
    ``env -u NAME`` (``--unset=NAME``, ``-uNAME``) or ``env -i`` (``-``,
    ``--ignore-environment``), which start it with only the ``NAME=v`` words given after them
    (:func:`sets_variable`, which wins)."""
    for i, word in enumerate(argv):
        program = word.rsplit("/", 1)[-1]
        if program == "distconv":
            break
        if program == "env" and env_removes(argv[i + 1 :], name):
            return True
    return False
