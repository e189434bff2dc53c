"""Where the commands of a container's command line start, and which program each runs: the
word after a shell's separator, a reserved word (``then``, ``do``), a ``NAME=value``, a
redirection, a shell's ``-c`` and the wrappers that run the command after them (``exec``,
``env``, ``tini --``, ``timeout 5``), each with its options read past.

Shared by :mod:`distconv.deploy.walk` (the words an ``echo`` only prints: :func:`unprinted`) and
:mod:`distconv.deploy.programs` (a program only the cluster knows).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from distconv.deploy.words import split_words

#: what a shell's string starts a new command after
SEPARATORS = {";", "&&", "||", "|", "|&", "&", "(", ")", ";;", "\n"}
#: a shell's reserved words that a command follows (``if ...; then $PROG; fi``, ``{ $PROG; }``)
RESERVED_WORDS = {"if", "then", "elif", "else", "while", "until", "do", "{", "!"}
#: the shells that read a ``-c`` string, or without one and without a script file, their input;
#: :func:`distconv.deploy.shell.shell_command` reads the ``-c`` string of each
SHELLS = {"sh", "bash", "dash", "ash", "zsh", "ksh", "mksh"}
#: a shell's redirection (``>``, ``>>``, ``2>&1``'s ``>&``, ``<``): the word after is a file
REDIRECT = re.compile(r"[<>&|]*[<>][<>&|]*")
#: the separators that pipe a command's output into the next (bash's ``|&``: its errors too)
_PIPES = {"|", "|&"}
#: the commands that only print their arguments (``echo $TRAIN > /log`` runs no rank)
_PRINTS = {"echo", "printf"}
#: ``NAME=value``: a variable the shell sets for the command after it
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")
#: the programs that run the command after them: (their short options that take a value, the
#: words they take before the command: ``timeout``'s duration); ``time`` is also bash's
#: reserved word, ``exec`` its built-in (``-a NAME``), the rest as their manuals give them
WRAPPERS: dict[str, tuple[str, int]] = {
    "exec": ("a", 0),
    "env": ("uCSa", 0),
    "nohup": ("", 0),
    "tini": ("pe", 0),
    "dumb-init": ("r", 0),
    "timeout": ("sk", 1),
    "nice": ("n", 0),
    "stdbuf": ("ioe", 0),
    "setsid": ("", 0),
    "time": ("fo", 0),
    # an image's entrypoint drops root through these: the user first (gosu app CMD)
    "gosu": ("", 1),
    "su-exec": ("", 1),
    "s6-setuidgid": ("", 1),
    "runuser": ("ugGw", 0),  # its -u form; su's form (runuser app -c STRING) runs a shell
    "sudo": ("aCcDgpRrTtUu", 0),
    "doas": ("aCu", 0),
    "chpst": ("uUbe/CnlLmdopfcart", 0),
    "setpriv": ("", 0),
    # a root to run in first (chroot /srv CMD)
    "chroot": ("", 1),
    # CPU, memory and I/O placement: taskset's mask (or -c list) first
    "taskset": ("", 1),
    "numactl": ("iNcmCpPw", 0),
    "ionice": ("cn", 0),
}
#: the long options of those wrappers whose value is the next word (``--signal TERM``)
_LONG_VALUED = {
    "--unset",
    "--chdir",
    "--split-string",
    "--argv0",
    "--signal",
    "--kill-after",
    "--adjustment",
    "--rewrite",
    "--input",
    "--output",
    "--error",
    "--format",
    "--interleave",
    "--preferred",
    "--preferred-many",
    "--weighted-interleave",
    "--membind",
    "--cpunodebind",
    "--cpubind",
    "--physcpubind",
    "--class",
    "--classdata",
    "--user",
    "--group",
    "--supp-group",
    "--whitelist-environment",
    "--other-user",
    "--prompt",
    "--close-from",
    "--login-class",
    "--role",
    "--type",
    "--command-timeout",
    "--chroot",
    "--reuid",
    "--regid",
    "--ruid",
    "--euid",
    "--rgid",
    "--egid",
    "--groups",
    "--inh-caps",
    "--ambient-caps",
    "--bounding-set",
    "--securebits",
    "--pdeathsig",
    "--selinux-label",
    "--apparmor-profile",
    "--userspec",
}


def program_name(word: str) -> str:
    """The program ``word`` names, its folder left out (``/usr/bin/env`` is ``env``)."""
    return word.rsplit("/", 1)[-1]


def command_starts(words: list[str]) -> list[int]:
    """The indices in ``words`` of the program each command of them runs, wrappers, their
    options, ``NAME=value`` words, reserved words and redirections read past (``tini -- echo
    x`` runs ``echo``; ``sh -c "cd /x"`` runs ``cd``, the first word of its string)."""
    return [at for at, program in _command_words(words) if program]


def _command_words(words: list[str]) -> Iterator[tuple[int, bool]]:
    """(index, whether it is the program) of each word of ``words`` that stands where a
    command starts, as :func:`command_starts` reads them: the program, and before it the
    reserved words, ``NAME=value`` words, wrappers and shells with ``-c``."""
    at, at_command = 0, True
    while at < len(words):
        word, name = words[at], program_name(words[at])
        if word in SEPARATORS:
            at, at_command = at + 1, True
        elif REDIRECT.fullmatch(word):
            at += 2
        elif not at_command:
            at += 1
        elif word in RESERVED_WORDS or ASSIGNMENT.match(word):
            yield at, False
            at += 1
        elif name in WRAPPERS:
            yield at, False
            at = _past_wrapper(words, at)
        elif name in SHELLS and _runs_string(words[at + 1 :]):
            yield at, False
            at = _past_options(words, at + 1, "oO")
        else:
            yield at, True
            at, at_command = at + 1, False


def past_wrappers(words: list[str]) -> int:
    """The index in ``words``, a command line, of the program its leading wrappers run
    (``tini -g -- sh -c ...``: that of ``sh``), their options and the ``NAME=value`` words
    after ``env`` read past; 0 where it starts with no wrapper."""
    at = 0
    while at < len(words):
        if program_name(words[at]) in WRAPPERS:
            at = _past_wrapper(words, at)
        elif at and ASSIGNMENT.match(words[at]):
            at += 1
        else:
            break
    return at


def _past_wrapper(words: list[str], at: int) -> int:
    """The index past the wrapper at ``words[at]``, its options and the words it takes first."""
    valued, taken = WRAPPERS[program_name(words[at])]
    return _past_options(words, at + 1, valued) + taken


def _past_options(words: list[str], at: int, valued: str) -> int:
    """The index past the options at ``words[at:]`` (``--`` the last of them): a short one in
    ``valued`` takes the rest of its word or the next word, as does a long valued one."""
    while at < len(words) and words[at][:1] in "-+" and len(words[at]) > 1:
        word = words[at]
        at += 1
        if word == "--":
            break
        if word.startswith("--"):
            at += word in _LONG_VALUED
            continue
        for place, letter in enumerate(word[1:], 2):
            if letter in valued:
                at += 0 if word[place:] else 1
                break
    return at


def _shell_options(args: list[str]) -> tuple[str, list[str]]:
    """The letters of a shell's short options at the head of ``args``, and the words after
    them (its script file or string, and that one's arguments); ``--`` or a lone ``-`` ends
    them (POSIX sh: a ``-`` "shall be treated as the first operand and then ignored")."""
    letters, at = "", 0
    while at < len(args) and args[at][:1] in "-+":
        word = args[at]
        at += 1
        if word in ("--", "-"):
            break
        if not word.startswith("--"):
            letters += word[1:]
            at += sum(letter in "oO" for letter in word[1:])  # -o NAME, bash's -O NAME
    return letters, args[at:]


def _runs_string(args: list[str]) -> bool:
    """Whether a shell given ``args`` runs a ``-c`` string: the words after it are a command."""
    return "c" in _shell_options(args)[0]


def reads_commands(command: list[str]) -> bool:
    """Whether ``command``, the reader of a pipe, runs what it reads as commands: a shell
    that runs no ``-c`` string and no script file (``sh``, ``bash -s``), or ``xargs``."""
    starts = command_starts(command)
    if not starts:
        return False
    name = program_name(command[starts[0]])
    if name == "xargs":
        return True
    letters, operands = _shell_options(_without_redirections(command[starts[0] + 1 :]))
    return name in SHELLS and ("s" in letters or not operands)


def _without_redirections(words: list[str]) -> list[str]:
    """``words`` less each redirection, its file and the descriptor written before it (shlex
    gives ``2>&1`` as ``2``, ``>&``, ``1``): ``sh 2>&1`` and ``sh > /log`` name no script."""
    kept: list[str] = []
    at = 0
    while at < len(words):
        if REDIRECT.fullmatch(words[at]):
            if kept and kept[-1].isdigit():
                kept.pop()
            at += 2
        else:
            kept.append(words[at])
            at += 1
    return kept


def next_separator(words: list[str], at: int) -> int:
    """The index of the first separator in ``words`` from ``at`` on; ``len(words)`` if none."""
    return next((i for i in range(at, len(words)) if words[i] in SEPARATORS), len(words))


def unprinted(words: list[str]) -> list[str]:
    """``words`` less the arguments of each ``echo`` or ``printf`` a command runs (``sh -c
    "echo $TRAIN > /log"``, ``tini -- echo ...``: :func:`command_starts`), to the shell's next
    separator, and less each redirection and its file. What an echo pipes into a reader that
    runs it (``echo distconv train ... | sh``: :func:`_run_later`) is kept, split as that
    reader splits the line (``echo "distconv train ..." | sh``): ``| tee /log`` only writes
    it down; so are the words of a here-string such a reader runs (``bash <<< "..."``:
    :func:`_reads_here_string`)."""
    starts, kept, at = set(command_starts(words)), [], 0
    while at < len(words):
        if at in starts and program_name(words[at]) in _PRINTS:
            end = next_separator(words, at)
            if _run_later(words, at):  # its reader splits the line it prints as a shell does
                line = " ".join(words[at + 1 : end])
                kept.extend([words[at], *unprinted(split_words(line, newlines=True))])
            at = end
            continue
        if REDIRECT.fullmatch(words[at]):
            if words[at] == "<<<" and at + 1 < len(words) and _reads_here_string(words, at):
                kept.extend(unprinted(split_words(words[at + 1], newlines=True)))
            at += 2
            continue
        kept.append(words[at])
        at += 1
    return kept


def _reads_here_string(words: list[str], at: int) -> bool:
    """Whether the command whose here-string ``words[at]`` (``<<<``) gives runs it as
    commands: a shell that reads its input (``bash <<< "distconv train ..."``:
    :func:`reads_commands`)."""
    begin = max((i + 1 for i in range(at) if words[i] in SEPARATORS), default=0)
    return reads_commands(words[begin : next_separator(words, at)])


def _run_later(words: list[str], at: int) -> bool:
    """Whether what the command at ``words[at]`` prints is run by a later command of its
    pipeline (``echo ... | sh``, ``echo ... | tee /log | sh``: :func:`reads_commands`). Inside
    a group (``(echo ...) | sh``, ``{ echo ...; } | sh``, ``while ...; do echo ...; done | sh``,
    a ``case`` arm's ``esac | sh``) it prints into the group's output, which the pipeline
    after the group's end reads."""
    depths = _depth_changes(words)
    groups = max(0, sum(depths[:at]))
    end = next_separator(words, at)
    while end < len(words):
        if words[end] in _PIPES:
            reader_end = next_separator(words, end + 1)
            if reads_commands(words[end + 1 : reader_end]):
                return True
            end = reader_end
        elif groups:
            end, groups = _past_group(depths, end), groups - 1
        else:
            return False
    return False


#: the words that open a group of commands (+1) and those that close one (-1), whose output is
#: one: a subshell, a brace group, a loop, an ``if`` (a ``case``: :func:`_depth_changes`);
#: ``((`` and ``))``, one word each (an arithmetic expansion, or two parentheses shlex gives
#: together: ``$(a $(b))``), count twice
_GROUP_DEPTH = {
    **dict.fromkeys(["(", "{", "if", "while", "until", "for"], 1),
    **dict.fromkeys([")", "}", "fi", "done"], -1),
    "((": 2,
    "))": -2,
}
#: what ends a ``case`` arm: the next pattern follows
_ARM_ENDS = {";;", ";&", ";;&"}
#: the reserved words that open or close a group: one only where a command starts, an
#: argument elsewhere (``echo done``, ``echo in case of``), as the shell reads them
_GROUP_WORDS = {"if", "while", "until", "for", "case", "{", "}", "fi", "done", "esac"}


def _depth_changes(words: list[str]) -> list[int]:
    """How each of ``words`` changes the depth of groups (:data:`_GROUP_DEPTH`): a ``case``
    opens one that its ``esac`` closes, and the words from ``case`` to ``in`` and each arm's
    pattern, to its ``)`` (``x)``, ``(x|y)``), open and close none; nor does a reserved word
    that is no command's first (:data:`_GROUP_WORDS`)."""
    changes: list[int] = []
    cases: list[str] = []  # per open case: "head" to its in, "pattern" to a ), then "body"
    commands = {at for at, _ in _command_words(words)}  # where a reserved word is one
    for at, word in enumerate(words):
        state = cases[-1] if cases else None
        # an argument opens or closes no group; an esac ends a case with no more arms there too
        if word in _GROUP_WORDS and at not in commands:
            word = word if word == "esac" and state in ("head", "pattern") else ""
        change = _GROUP_DEPTH.get(word, 0)
        if state in ("head", "pattern") and word != "esac":
            change = 0
            if (state, word) in (("head", "in"), ("pattern", ")")):
                cases[-1] = "pattern" if state == "head" else "body"
        elif word == "case":
            cases.append("head")
            change = 1
        elif state and word == "esac":
            cases.pop()
            change = -1
        elif state and word in _ARM_ENDS:
            cases[-1] = "pattern"
        changes.append(change)
    return changes


def _past_group(depths: list[int], at: int) -> int:
    """The index past the end of the group that the word at ``at`` is in (its ``)``, ``}``,
    ``fi``, ``done`` or ``esac``), ``depths`` the words' :func:`_depth_changes`;
    ``len(depths)`` where it has none."""
    depth = 0
    for end in range(at, len(depths)):
        depth += depths[end]
        if depth < 0:
            return end + 1
    return len(depths)
