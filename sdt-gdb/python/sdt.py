# SDT's commands inside gdb, for a gdb connected to `sdt gdbserver` (`sdt gdb` sources
# this file). They move the session between the run's snapshots through the server's
# monitor commands (`monitor list`, `monitor goto S3`), then make gdb forget what it
# cached of the previous one: registers, frames, memory, the thread list. Breakpoints,
# displays and the value history stay. Values set in gdb (`set var`, `set $rax`) stay in
# the server until `sdt commit` stores them as a new snapshot, or gdb moves on.
#
#   sdt list                   the run's snapshots, * at the current one
#   sdt goto [--quiet] SNAP    go to SNAP (S3, or 3; 2:S3 in run 2 of the tree), in the
#                              user's frame: SetBreakpoint's caller
#   sdt next / sdt prev        the snapshot after / before the current one
#   sdt history [--changes] EXPR
#                              EXPR in every snapshot (only where it changed)
#   sdt last EXPR              the latest snapshot before this one where EXPR differed
#   sdt commit                 store this snapshot with the values set as S3.e1, go there
#   sdt frame                  the user's frame, where a Rust thread stands in SDT's trap
#                              or a rank in SDT's MPI library
#   sdt frame --for EXPR       a frame where EXPR has a value: the user's frame, a caller's
#                              where EXPR is a caller's local, the one frame of F on
#                              another thread where EXPR is F's local (an OpenMP region's
#                              thread and `main`'s variables), or the one other thread's
#                              frame that has it (main's locals from a lambda's thread)

import os
import re

import gdb

# A snapshot cannot call functions (`print f()`): the server answers the call with a
# signal, on which gdb puts back the registers it set for it.
gdb.execute("set unwindonsignal on")


class Entry:
    """One line of `monitor list`: `* S3 thread 1234 breakpoint 1/2/10 hit 3 "attrs"`."""

    def __init__(self, line):
        self.current = line.startswith("*")
        fields = line[2:].split(" ", 3)
        self.name = fields[0]
        self.tid = int(fields[2])
        self.trigger = fields[3] if len(fields) > 3 else ""


def monitor(command):
    """What the server printed for `monitor COMMAND`; its errors raised as gdb errors."""
    said = gdb.execute("monitor " + command, to_string=True)
    for line in said.splitlines():
        if line.startswith("sdt: error: "):
            raise gdb.GdbError(line[len("sdt: error: "):])
    return said


def entries():
    return [Entry(l) for l in monitor("list").splitlines() if l[:2] in ("* ", "  ")]


def snapshot_name(arg):
    """S3 for 3; RUN:S3 (a snapshot of another run of the tree) for RUN:3."""
    run, colon, name = arg.strip().rpartition(":")
    return run + colon + ("S" + name if name[:1].isdigit() else name)


def forget_caches():
    """Makes gdb read everything again from the server: the registers and frames, the
    memory it caches, the thread list."""
    for command in ("maintenance flush register-cache", "maintenance flush dcache"):
        try:
            gdb.execute(command, to_string=True)
        except gdb.error:
            pass
    gdb.execute("info threads", to_string=True)


def in_mpi_library(frame):
    """A frame of SDT's MPI interposition library (a rank stopped at a cut stands in
    it, inside the MPI call it intercepted)."""
    sal = frame.find_sal()
    objfile = sal.symtab.objfile.filename if sal.symtab else ""
    return os.path.basename(objfile).startswith("sdtmpi-")


def is_sdt_frame(frame):
    """A frame of SDT's libraries or of the Rust library under them (the `breakpoint!`
    macro's trap), above the user's code."""
    sal = frame.find_sal()
    path = sal.symtab.filename if sal.symtab else ""
    return "sdt-lib/src/" in path or path.startswith("/rustc/") or in_mpi_library(frame)


# The functions a C or C++ thread takes a snapshot in: gdb shows it there, on the
# SetBreakpoint line; its variables are its caller's.
BREAKPOINT_FUNCTIONS = ("SetBreakpoint", "sdt_breakpoint")


def select_user_frame(caller=False):
    """Selects the first frame of the user's code above SDT's libraries, if the thread
    stands in one of them; with CALLER, above SetBreakpoint too. Returns whether it
    moved."""
    frame, skipped, in_sdt = gdb.newest_frame(), 0, False
    while frame is not None:
        path = frame.find_sal().symtab.filename if frame.find_sal().symtab else ""
        if caller and frame.name() in BREAKPOINT_FUNCTIONS:
            in_sdt = True
        elif is_sdt_frame(frame):
            in_sdt = in_sdt or "sdt-lib/src/" in path or in_mpi_library(frame)
        else:
            break
        frame, skipped = frame.older(), skipped + 1
    if frame is None or skipped == 0 or not in_sdt:
        return False
    frame.select()
    return True


# The thread `sdt frame --for` starts from: the one that took the snapshot (`sdt goto`
# names it), or the one gdb had selected at the first `sdt frame`.
HOME = {"tid": None}

# What gdb says of a name it finds in no block around the frame: maybe a caller's local.
# (C and C++ quote the name with ", Rust with ' and no full stop.)
NO_SYMBOL = re.compile(r"""^No symbol (".*"|'.*') in current context\.?$""")
# What it says of a local of a function whose frame is not on this thread's stack: an
# OpenMP region's thread, whose outlined function is nested in that function's block
# (the function is named for its own locals, not for those of an inner block).
NO_FRAME_IN_BLOCK = re.compile(r"^No frame is currently executing in (?:block .+\.|specified block)$")


def enclosing_functions(frame):
    """The functions whose blocks enclose FRAME's function, innermost first: `main` for
    the function GCC outlines from an OpenMP region of main."""
    own, found = frame.function(), []
    try:
        block = frame.block()
    except RuntimeError:
        return found
    while block is not None:
        function = block.function
        if function is not None and function != own and function.print_name not in found:
            found.append(function.print_name)
        block = block.superblock
    return found


def home_thread():
    """The thread `sdt frame --for` starts from, selected."""
    if HOME["tid"] is None:
        HOME["tid"] = gdb.selected_thread().ptid[1]
    for thread in gdb.selected_inferior().threads():
        if thread.ptid[1] == HOME["tid"]:
            thread.switch()
            return thread
    return gdb.selected_thread()


def why_not(expr):
    """Why gdb gives EXPR no value in the selected frame; None when it gives one."""
    try:
        gdb.parse_and_eval(expr)
        return None
    except gdb.error as e:
        return str(e)


def stack(thread):
    """THREAD's frames, newest first (THREAD selected)."""
    thread.switch()
    frame = gdb.newest_frame()
    while frame is not None:
        yield frame
        frame = frame.older()


def select_level(thread, level):
    """Selects frame #LEVEL of THREAD."""
    for i, frame in enumerate(stack(thread)):
        if i == level:
            frame.select()
            return frame
    raise gdb.GdbError("thread %d has no frame #%d" % (thread.ptid[1], level))


def function_name(frame):
    """FRAME's function as gdb names it in its messages (`ns::f(int)` in C++)."""
    function = frame.function()
    return function.print_name if function is not None else frame.name()


def found_in(frame, level, thread):
    """What `sdt frame --for` says of the frame it took: (name as `frame` shows it,
    level, tid)."""
    return frame.name() or function_name(frame), level, thread.ptid[1]


# Past this many threads, `sdt frame --for` does not look through the other threads'
# frames for a name the home thread has none of: each would be unwound and tried.
MAX_THREADS_SEARCHED = 256


def select_for(expr, caller):
    """Selects the home thread's user frame (as `sdt frame [--caller]`), or, where EXPR
    has no value there and gdb says it is a local of another frame, that frame:
    - the nearest caller in which it has one;
    - for a local of a function whose block encloses the frame's (an OpenMP region's
      outlined function is nested in the function it came from), that function's frame
      on the one thread that runs it;
    - for a name no frame of this thread has (a Rust closure's or a C++ lambda's thread,
      and main's locals), the innermost frame that has it on the one other thread that
      has one.
    Two threads with such a frame would make it a guess: none is taken then.
    Returns (function, level, tid) of the frame taken instead of the user's, or None."""
    home = home_thread()
    select_user_frame(caller)
    start = gdb.selected_frame()
    why = why_not(expr)
    if why is None:
        return None
    # Frames are read again once another thread has been selected: keep the level.
    frame, start_level = start, start.level()
    if NO_SYMBOL.match(why):
        older, level = start.older(), start_level + 1
        while older is not None:
            older.select()
            said = why_not(expr)
            if said is None:
                return found_in(older, level, home)
            if NO_FRAME_IN_BLOCK.match(said):
                why, frame = said, older
                break
            older, level = older.older(), level + 1
    if NO_FRAME_IN_BLOCK.match(why):
        for function in enclosing_functions(frame):
            runs = [(thread, level) for thread in gdb.selected_inferior().threads()
                    for level, f in enumerate(stack(thread)) if function_name(f) == function]
            found = only_thread(runs, expr)
            if found is not None:
                return found
    elif NO_SYMBOL.match(why) and len(gdb.selected_inferior().threads()) <= MAX_THREADS_SEARCHED:
        found = only_thread([(thread, level) for thread in gdb.selected_inferior().threads()
                             if thread.ptid[1] != home.ptid[1]
                             for level in innermost_with(thread, expr)], expr)
        if found is not None:
            return found
    select_level(home, start_level)
    return None


def innermost_with(thread, expr):
    """The level of THREAD's innermost frame in which EXPR has a value, as a list of at
    most one."""
    for level, frame in enumerate(stack(thread)):
        frame.select()
        if why_not(expr) is None:
            return [level]
    return []


def only_thread(frames, expr):
    """Of FRAMES ((thread, level) pairs), the first in which EXPR has a value, selected,
    if they are all on one thread: (function, level, tid). None otherwise."""
    if len({thread.ptid[1] for thread, _ in frames}) != 1:
        return None
    for thread, level in frames:
        found = select_level(thread, level)
        if why_not(expr) is None:
            return found_in(found, level, thread)
    return None


# The convenience variable that holds what EXPR refers to after `sdt frame --for EXPR`,
# where EXPR is a C++ reference: printed as a value, a reference gives its address only.
REFERENT = "_sdt_referent"


def referent(value):
    """What VALUE refers to where it is a C++ reference, else None."""
    if value.type.strip_typedefs().code in (gdb.TYPE_CODE_REF, gdb.TYPE_CODE_RVALUE_REF):
        return value.referenced_value()
    return None


def keep_referent(expr):
    """Sets $_sdt_referent to what EXPR refers to, if it is a reference (void if not);
    returns whether it is."""
    try:
        found = referent(gdb.parse_and_eval(expr))
    except gdb.error:
        found = None
    gdb.set_convenience_variable(REFERENT, found)
    return found is not None


class Frame(gdb.Command):
    """Select the user's frame where a Rust program's thread stands in SDT's trap, or a
rank in SDT's MPI library. With --caller, where a C or C++ thread stands in
SetBreakpoint too: its caller's frame, whose variables are the user's.
With --for EXPR: where EXPR has no value there but is a caller's local, the caller's
frame; where it is a local of a function F that this thread does not run (an OpenMP
region's variables of main, say), F's frame on the one thread that runs F; where no
frame of this thread has it (main's locals from a lambda's thread), the innermost frame
that has it on the one other thread that does. Where EXPR is a C++ reference, what it
refers to is kept in $_sdt_referent."""

    def __init__(self):
        super().__init__("sdt frame", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        rest, caller = arg.strip(), False
        if rest == "--caller" or rest.startswith("--caller "):
            rest, caller = rest[len("--caller"):].lstrip(), True
        if rest.startswith("--for ") and rest[len("--for "):].strip():
            expr = rest[len("--for "):]
            moved = select_for(expr, caller)
            if moved is not None:
                gdb.write("[sdt] in %s, frame #%d of thread %d\n" % moved)
            if keep_referent(expr):
                gdb.write("[sdt] a reference: $%s\n" % REFERENT)
            if from_tty:
                gdb.execute("frame")
        elif rest:
            raise gdb.GdbError("usage: sdt frame [--caller] [--for EXPR]")
        else:
            HOME["tid"] = HOME["tid"] or gdb.selected_thread().ptid[1]
            if select_user_frame(caller):
                gdb.execute("frame")


def say_findings():
    """Says the deadlocks of the current snapshot, or that every thread waits for ever."""
    for line in monitor("waits --findings").splitlines():
        gdb.write("[sdt] %s  (sdt waits)\n" % line)


def goto(name, quiet=False):
    """Moves to snapshot NAME and selects the thread that took it, in the user's frame
    (as `sdt frame --caller` selects it); returns its entry."""
    said = monitor("goto " + name).splitlines()
    forget_caches()
    for line in said[:-1]:
        gdb.write("[sdt] %s\n" % line[len("sdt: "):])
    entry = Entry(said[-1])
    HOME["tid"] = entry.tid
    for thread in gdb.selected_inferior().threads():
        if thread.ptid[1] == entry.tid:
            thread.switch()
            break
    select_user_frame(caller=True)
    if not quiet:
        gdb.write("[sdt] %s  thread %d  %s\n" % (entry.name, entry.tid, entry.trigger))
        say_findings()
        gdb.execute("frame")
        gdb.execute("display")
    return entry


def current_index(all_entries):
    for i, e in enumerate(all_entries):
        if e.current:
            return i
    raise gdb.GdbError("the server names no current snapshot")


def value_of(expr):
    """EXPR as gdb prints it (what it refers to, for a C++ reference) in the selected
    frame, else in the frame `sdt frame --for EXPR` selects, or the error it gives, in
    angle brackets; and where, when not in the frame selected first."""
    moved = None if why_not(expr) is None else select_for(expr, caller=True)
    where = "" if moved is None else "  [in %s, frame #%d of thread %d]" % moved
    try:
        value = gdb.parse_and_eval(expr)
        referred = referent(value)
        return str(value if referred is None else referred), where
    except gdb.error as e:
        return "<%s>" % e, ""


class Sdt(gdb.Command):
    """SDT: move between the snapshots of a run.

sdt list                       the run's snapshots, * at the current one
sdt goto SNAP                  go to snapshot SNAP (S3, or 3)
sdt next, sdt prev             the snapshot after, or before, the current one
sdt history [--changes] EXPR   EXPR in every snapshot (--changes: only where it changed)
sdt last EXPR                  the latest snapshot before this one where EXPR had another value
sdt commit                     store this snapshot with the values set in it as a new one (S3.e1)
sdt waits                      what each blocked thread waits for (a mutex and its holder,
                               a thread it joins, a descriptor), and the deadlocks among them
sdt frame [--caller]           the user's frame, where a Rust thread stands in SDT's trap or a
                               rank in SDT's MPI library (--caller: SetBreakpoint's caller)
sdt frame --for EXPR           a frame where EXPR has a value: a caller's, or main's on the
                               thread that runs it for an OpenMP region's thread"""

    def __init__(self):
        super().__init__("sdt", gdb.COMMAND_USER, prefix=True)


class List(gdb.Command):
    """The run's snapshots: name, thread, trigger; * marks the current one."""

    def __init__(self):
        super().__init__("sdt list", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        gdb.write(monitor("list"))


class Waits(gdb.Command):
    """What each blocked thread waits for: a mutex (by its global's name) and the thread
holding it, a thread it joins, another futex word, a descriptor, a child; and the
deadlocks among them. With --findings, the deadlocks alone (as `sdt gdb` and
`sdt goto` say them)."""

    def __init__(self):
        super().__init__("sdt waits", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        if arg.strip() == "--findings":
            say_findings()
        elif arg.strip():
            raise gdb.GdbError("usage: sdt waits [--findings]")
        else:
            gdb.write(monitor("waits"))


class Goto(gdb.Command):
    """Go to snapshot SNAP (S3, or 3): same session, breakpoints and displays kept."""

    def __init__(self):
        super().__init__("sdt goto", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        # --quiet: no frame or displays printed (for `sdt history` on the command line).
        words = arg.split()
        names = [w for w in words if w != "--quiet"]
        if len(names) != 1:
            raise gdb.GdbError("usage: sdt goto [--quiet] SNAP")
        goto(snapshot_name(names[0]), quiet="--quiet" in words)


class Step(gdb.Command):
    def __init__(self, name, delta):
        self.__doc__ = "Go to the snapshot %s the current one." % ("after" if delta > 0 else "before")
        super().__init__("sdt " + name, gdb.COMMAND_USER)
        self.delta = delta

    def invoke(self, arg, from_tty):
        all_entries = entries()
        i = current_index(all_entries) + self.delta
        if not 0 <= i < len(all_entries):
            raise gdb.GdbError("no snapshot %s %s" % ("after" if self.delta > 0 else "before",
                                                    all_entries[i - self.delta].name))
        goto(all_entries[i].name)


class History(gdb.Command):
    """Print EXPR in every snapshot of the run: snapshot, thread, trigger, value.
With --changes, only the snapshots where the value changed. Ends where it started."""

    def __init__(self):
        super().__init__("sdt history", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        changes = arg.lstrip().startswith("--changes")
        expr = arg.lstrip()[len("--changes"):] if changes else arg
        if not expr.strip():
            raise gdb.GdbError("usage: sdt history [--changes] EXPR")
        all_entries = entries()
        start = all_entries[current_index(all_entries)].name
        previous = None
        try:
            for e in all_entries:
                goto(e.name, quiet=True)
                value, where = value_of(expr)
                if not changes or value != previous:
                    gdb.write("%-6s thread %-7d %-40s %s%s\n" % (e.name, e.tid, e.trigger, value, where))
                previous = value
        finally:
            goto(start, quiet=True)


class Last(gdb.Command):
    """Go to the latest snapshot before the current one where EXPR had another value."""

    def __init__(self):
        super().__init__("sdt last", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        if not arg.strip():
            raise gdb.GdbError("usage: sdt last EXPR")
        all_entries = entries()
        here = current_index(all_entries)
        now = value_of(arg)[0]
        for e in reversed(all_entries[:here]):
            goto(e.name, quiet=True)
            value = value_of(arg)[0]
            if value != now:
                goto(e.name)
                gdb.write("[sdt] %s was %s (now %s)\n" % (arg.strip(), value, now))
                return
        goto(all_entries[here].name, quiet=True)
        raise gdb.GdbError("%s has had the value %s since %s" % (arg.strip(), now, all_entries[0].name))


class Commit(gdb.Command):
    """Store this snapshot, with the values set in it (set var, set $reg), as a new
snapshot in a child run: S3.e1 (S3.e2 for the next edit of S3), which sdt restore, sdt gdb
and the exporters take like any other. The session moves there. Without it, values set
are dropped when the session moves to another snapshot."""

    def __init__(self):
        super().__init__("sdt commit", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        if arg.strip():
            raise gdb.GdbError("usage: sdt commit")
        said = monitor("commit")
        forget_caches()
        gdb.write("[sdt] %s" % said[len("sdt: "):])


Sdt()
List()
Waits()
Goto()
Frame()
Step("next", 1)
Step("prev", -1)
History()
Last()
Commit()
