"""Oracle guard, installed by the grading runner before any project code: the code under test may not observe the tests.

Standalone on purpose (no alight imports), like the runner and the outcomes plugin beside it. The principle:
code defined in a workspace file that is not a test file may not observe the tests' data, neither in files
(the test folders and files, the grader's files, the process's own /proc entries) nor in the interpreter's
memory (frames, test modules and their code, the garbage collector, tracers, raw memory); a program it
starts runs outside this guard, so starting one counts as the read it could make.

An audit hook (`sys.addaudithook`: it cannot be removed) judges every audited event. An event is charged to the
innermost project frame on the stack, a frame running the workspace's code or the tests' code (the standard
library, pytest and this guard are transparent): what a library does for the code under test is the code's
doing; what a test does, or a test's callback the code called, is the test's own. Code the workspace builds
at run time (exec, FunctionType, a swapped __code__) counts as the workspace's, whatever file it names.

Frames are the one thing reachable without a further audited event once held (f_back, f_locals are not
audited), so the rule for them is that none reaches the workspace's code: taking one directly is a read; a
library that takes one on its behalf is watched until it returns, and returning a frame is a read.
Test modules are served by `TestModule`, whose attribute reads are audit events too.

Each read is written to the grader's pipe (opened before project code runs) before the hook raises, so a
`try/except` cannot erase it; the record starts and ends with a nonce only this guard knows, and the end line
counts the reads, so a record cut short or redirected (os.dup2, os.close) is told apart by the grader.
Nothing the project can reach leads back here: the names below are bound before project code runs, the
runner gives this module its own copy of the builtins, and the only objects it hands out (TestModule, the idle
tracer) are built in a namespace of their own, so rebinding a module attribute or a global changes nothing.

Long because: one audit hook and the judgement of each event it watches, a few lines each; apart, the rules of
attribution would live away from the events they judge.
"""

from __future__ import annotations

import re
import sys
from _thread import get_ident
from itertools import islice
from json import dumps, load
from os import O_WRONLY, PathLike, _exit, fsdecode, getcwd, urandom, write
from os import open as open_fd
from os.path import join, normpath, realpath
from types import CodeType, FrameType, FunctionType, ModuleType

_GUARD, _WORKSPACE, _TEST, _OTHER = "guard", "workspace", "test", "other"
_FRAME_ATTRS = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}  # audited reads that hand out a frame
_CODE_ATTRS = {"f_code", "__code__", "gi_code", "cr_code", "ag_code"}  # audited reads that hand out code
_WHOLE_HEAP = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"}
_WHOLE_HEAP |= {"sys._current_exceptions"}
_TRACERS = {"sys.settrace", "sys.setprofile"}
# A program the code under test starts runs outside this interpreter and its guard (a fork keeps both).
_PROGRAMS = {"subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system"}
_WATCHED = {"open", "os.listdir", "os.scandir", "sys._getframe", "object.__getattr__", "object.__setattr__"}
_WATCHED |= {"compile", "code.__new__", "exec", "function.__new__", "alight.test_module", *_WHOLE_HEAP, *_TRACERS}
_WATCHED |= _PROGRAMS
# What naming a module takes (pickle, importlib, inspect): not the tests' data.
_MODULE_NAMES = {"__name__", "__qualname__", "__file__", "__spec__", "__loader__", "__path__", "__package__"}
_OWN_PROCESS = re.compile(r"^/proc/(self|thread-self|\d+)(/|$)")


# What the project's code may hold: a test module's class (every attribute access an audit event the guard
# judges) and the idle tracer. Built apart (`_handed_out`): their globals lead nowhere.
_HANDED_OUT = """
class TestModule(ModuleType):
    def __getattribute__(self, name, _audit=audit, _get=ModuleType.__getattribute__):
        value = _get(self, name)
        _audit("alight.test_module", self, name, value, True)
        return value

    def __setattr__(self, name, value, _audit=audit, _set=ModuleType.__setattr__):
        _audit("alight.test_module", self, name, value, False)
        _set(self, name, value)


def untraced(frame, event, arg):
    return None  # the global tracer while a frame is watched: no other frame is traced
"""


def install(settings_path: str):
    """Read the grader's settings, open its record and add the audit hook; returns `finish`, which writes the
    record's last line once the tests have run."""
    with open(settings_path) as file:
        settings = load(file)
    guard = _Guard(settings)
    sys.addaudithook(guard.hook)
    return guard.finish


def _handed_out(filename: str) -> dict:
    space = {"__builtins__": {"__build_class__": __build_class__}, "__name__": "alight_oracle_handed_out"}
    space |= {"ModuleType": ModuleType, "audit": sys.audit}
    exec(compile(_HANDED_OUT, filename, "exec"), space)  # under this file's name: a change to them is the guard's
    return space


def _holds_frame(value, depth=3) -> bool:
    """Whether `value` is a frame or holds one within `depth` containers (inspect.stack's FrameInfo list)."""
    if isinstance(value, FrameType):
        return True
    if depth == 0 or isinstance(value, str | bytes | type | ModuleType | FunctionType):
        return False
    if isinstance(value, list | tuple | set | frozenset):
        items = value
    elif isinstance(value, dict):
        items = value.values()
    else:
        items = getattr(value, "__dict__", {}).values() if isinstance(getattr(value, "__dict__", None), dict) else ()
    return any(_holds_frame(item, depth - 1) for item in islice(items, 256))


class _Guard:
    def __init__(self, settings: dict) -> None:
        self.workspace = settings["workspace"].rstrip("/") + "/"
        self.tests = tuple(p.rstrip("/") for p in settings["tests"])  # absolute: test folders and files
        self.private = tuple(p.rstrip("/") for p in settings["private"])  # absolute: the grader's own files
        self.own_file = _Guard.__init__.__code__.co_filename
        handed_out = _handed_out(self.own_file)
        self.test_module, self.untraced = handed_out["TestModule"], handed_out["untraced"]
        # Taken now: the project's code may replace module attributes later, never these references.
        self.write, self.exit, self.getframe = write, _exit, sys._getframe
        self.settrace, self.gettrace, self.modules = sys.settrace, sys.gettrace, sys.modules
        self.realpath, self.getcwd = realpath, getcwd
        self.fd = open_fd(settings["record"], O_WRONLY)
        self.nonce = urandom(16).hex()
        self.reads = 0
        self.busy: set[int] = set()
        self.kinds: dict[str, str] = {}  # co_filename -> kind
        self.built: dict[int, CodeType] = {}  # code the workspace built at run time, kept so ids stay unique
        self.built_files: set[str] = set()  # their file names: id() is audited too, so it is asked only for these
        self.watched = 0
        self._line({"start": self.nonce})

    def _line(self, entry: dict) -> None:
        view = memoryview((dumps(entry) + "\n").encode())
        try:
            while view:
                view = view[self.write(self.fd, view) :]
        except OSError:
            self.exit(86)  # the record is gone: nothing the process says afterwards can be believed

    def finish(self) -> None:
        self._line({"end": self.nonce, "reads": self.reads})

    def hook(self, event: str, args: tuple) -> None:
        if event not in _WATCHED and not event.startswith("ctypes."):
            return
        me = get_ident()
        if me in self.busy:
            return  # the guard's own work (its frame walks read f_code, which is audited too)
        self.busy.add(me)
        try:
            found = self._judge(event, args)
        finally:
            self.busy.discard(me)
        if found:
            self._read(found)

    def _read(self, evidence: str) -> None:
        """Recorded first, then refused: the refusal can be caught, the record cannot be taken back."""
        self.reads += 1
        self._line({"read": evidence})
        raise PermissionError(f"test_oracle_read: {evidence}")

    # Who is asking.

    def _kind(self, code: CodeType) -> str:
        name = code.co_filename
        if name in self.built_files and id(code) in self.built:
            return _WORKSPACE
        kind = self.kinds.get(name)
        if kind is None:
            path = normpath(name) if name.startswith("/") else name
            if name == self.own_file:
                kind = _GUARD
            elif not path.startswith(self.workspace):
                kind = _OTHER
            else:
                kind = _TEST if self._under(path, self.tests) else _WORKSPACE
            self.kinds[name] = kind
        return kind

    def _stack(self) -> list[FrameType]:
        """The frames from the innermost outward, the guard's own left out."""
        frames, frame = [], self.getframe(0)
        while frame is not None:
            if self._kind(frame.f_code) != _GUARD:
                frames.append(frame)
            frame = frame.f_back
        return frames

    def _caller(self) -> FrameType | None:
        """The innermost frame outside the guard: the one that made the audited call."""
        frame = self.getframe(1)
        while frame is not None and self._kind(frame.f_code) == _GUARD:
            frame = frame.f_back
        return frame

    def _charged(self, frames: list[FrameType]) -> int | None:
        """The index of the workspace frame an event is charged to, or None when the tests' code (or no project
        code at all) is the innermost project frame."""
        for at, frame in enumerate(frames):
            kind = self._kind(frame.f_code)
            if kind == _WORKSPACE:
                return at
            if kind == _TEST:
                return None
        return None

    def _evidence(self, frame: FrameType, what: str) -> str:
        name = frame.f_code.co_filename.removeprefix(self.workspace)
        return f"{name}:{frame.f_lineno} {frame.f_code.co_qualname}() {what}"

    def _under(self, path: str, roots: tuple[str, ...]) -> bool:
        return any(path == root or path.startswith(root + "/") for root in roots)

    def _protected(self, path: str) -> bool:
        return self._under(path, self.tests) or self._under(path, self.private) or bool(_OWN_PROCESS.match(path))

    # The judgements.

    def _judge(self, event: str, args: tuple) -> str | None:
        if event == "open" or event in ("os.listdir", "os.scandir"):
            return self._file("opened" if event == "open" else "listed", args[0] if args else None)
        if event in ("compile", "code.__new__"):
            return self._named_code(args[1])
        if event == "exec" or event == "function.__new__":
            return self._code_run(args[0], event)
        if event == "alight.test_module":
            return self._module_access(*args)
        if event == "object.__setattr__":
            return self._attribute_set(*args[:3])
        if event == "object.__getattr__":
            return self._attribute_read(*args[:2])
        if event == "sys._getframe":
            return self._frame_taken("sys._getframe", args[0])
        frames = self._stack()
        at = self._charged(frames)
        if at is None:
            return None
        if event in _TRACERS:
            return self._evidence(frames[at], f"installed a tracer ({event}): it is handed every frame")
        if event in _PROGRAMS:
            what = f"started a program the guard cannot watch ({event} {str(args[:2])[:200]})"
            return self._evidence(frames[at], what)
        return self._evidence(frames[at], f"reached into the interpreter's memory ({event})")

    def _file(self, verb: str, path: object) -> str | None:
        path = "." if path is None else path
        if not isinstance(path, str | bytes | PathLike):
            return None  # a descriptor: its opening was judged
        name = fsdecode(path)  # pyright: ignore[reportUnknownArgumentType]
        full = self.realpath(join(self.getcwd(), name))
        if not self._protected(full):
            return None
        frames = self._stack()
        at = self._charged(frames)
        return None if at is None else self._evidence(frames[at], f"{verb} {full.removeprefix(self.workspace)}")

    def _named_code(self, filename: object) -> str | None:
        name = normpath(join(self.getcwd(), str(filename)))
        if not self._under(name, self.tests):
            return None
        frames = self._stack()
        at = self._charged(frames)
        return None if at is None else self._evidence(frames[at], f"built code under a test file's name ({name})")

    def _code_run(self, code: object, event: str) -> str | None:
        if not isinstance(code, CodeType):
            return None
        frames = self._stack()
        at = self._charged(frames)
        test_code = self._under(normpath(code.co_filename), self.tests)
        if at is None:
            if test_code and event == "exec":
                self._serve_test_module(code.co_filename)  # pytest importing a test module
            return None
        if test_code:
            return self._evidence(frames[at], f"ran a test file's code ({code.co_filename})")
        if event != "exec" or not frames[0].f_code.co_filename.startswith("<frozen importlib"):
            self._own(code)  # built at run time by or for the workspace: its code, whatever file it names
        return None

    def _own(self, code: CodeType) -> None:
        self.built[id(code)] = code
        self.built_files.add(code.co_filename)
        for const in code.co_consts:
            if isinstance(const, CodeType):
                self._own(const)

    def _serve_test_module(self, filename: str) -> None:
        for module in list(self.modules.values()):
            if type(module) is ModuleType and vars(module).get("__file__") == filename:
                module.__class__ = self.test_module

    def _module_access(self, module: object, name: str, value: object, read: bool) -> str | None:
        if read and (name in _MODULE_NAMES or callable(value) or isinstance(value, ModuleType)):
            return None  # a definition resolved by name (pickle does), not the tests' data: its code is guarded
        frames = self._stack()
        at = self._charged(frames)
        if at is None:
            return None
        what = "read" if read else "changed"
        return self._evidence(frames[at], f"{what} the test module's {vars(module).get('__name__')}.{name}")

    def _attribute_set(self, target: object, name: str, value: object) -> str | None:
        guarded = target is self.test_module or (
            isinstance(target, FunctionType) and self._kind(target.__code__) == _GUARD
        )
        if not guarded and not (name == "__code__" and isinstance(value, CodeType)):
            return None
        frames = self._stack()
        at = self._charged(frames)
        if at is None:
            return None
        if guarded:
            return self._evidence(frames[at], f"changed the grader's guard ({name})")
        self._own(value)  # type: ignore[arg-type]
        return None

    def _attribute_read(self, owner: object, name: str) -> str | None:
        if name in _FRAME_ATTRS:
            return self._frame_taken(f".{name}", getattr(owner, name))
        if name not in _CODE_ATTRS:
            return None
        if not isinstance(owner, FrameType):
            # A function's or generator's code: the workspace's own read of a test's code is one (a library's
            # signature of a test's callback is not: it hands back no code).
            caller, code = self._caller(), getattr(owner, name)
            if caller is None or self._kind(caller.f_code) != _WORKSPACE or not isinstance(code, CodeType):
                return None
            if self._kind(code) != _TEST:
                return None
            return self._evidence(caller, f"read the code of the test {code.co_qualname} ({code.co_filename})")
        frames = self._stack()
        at = self._charged(frames)
        if at is None or not self._outer(owner, frames, at):
            return None
        return self._evidence(frames[at], f"read its callers' frames (.f_code in {frames[0].f_code.co_qualname})")

    def _outer(self, frame: FrameType, frames: list[FrameType], at: int) -> bool:
        """Whether `frame` is on the stack outside the charged workspace frame: a caller's (a test's, pytest's)."""
        return any(f is frame for f in frames[at + 1 :])

    def _frame_taken(self, what: str, frame: object) -> str | None:
        frames = self._stack()
        at = self._charged(frames)
        if at is None:
            return None
        if at == 0:
            return self._evidence(frames[0], f"took a frame ({what}): from it the callers' locals are one step away")
        if isinstance(frame, FrameType) and self._outer(frame, frames, at):
            return self._evidence(frames[at], f"read its callers' frames ({what} in {frames[0].f_code.co_qualname})")
        self._watch(frames[at - 1])
        return None

    def _watch(self, frame: FrameType) -> None:
        """The library frame the workspace called, watched until it returns: returning a frame is a read."""
        frame.f_trace, frame.f_trace_lines = self._returned, False
        if self.watched == 0 and self.gettrace() is None:
            self.settrace(self.untraced)
        self.watched += 1

    def _returned(self, frame, event, arg):
        if event != "return":
            return self._returned
        me = get_ident()
        self.busy.add(me)
        try:
            frame.f_trace = None
            self.watched = max(0, self.watched - 1)
            if self.watched == 0 and self.gettrace() is self.untraced:
                self.settrace(None)
            found = None
            if _holds_frame(arg):
                frames = self._stack()
                at = self._charged(frames[1:])  # frames[0] is the returning library frame itself
                if at is not None:
                    found = self._evidence(frames[at + 1], f"was handed a frame by {frame.f_code.co_qualname}()")
        finally:
            self.busy.discard(me)
        if found:
            self._read(found)
        return None
