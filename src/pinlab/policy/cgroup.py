"""A cgroup v2 hierarchy: directories, processes, interface files and pluggable controllers.

Models the parts of kernel/cgroup/cgroup.c that the dmem controller and the pin proposals
need (``policy-semantics.md`` §2):

* :class:`CgroupTree` -- the unified hierarchy with its root ``/``; :meth:`~CgroupTree.mkdir`,
  :meth:`~CgroupTree.rmdir` (``-EBUSY`` while it has processes or children; the controllers'
  ``css_offline`` runs, which resets dmem min/low/max, P-32), :meth:`~CgroupTree.attach`
  (moves a task; writes ``task.cgroup``), :meth:`~CgroupTree.lookup` (``-ENOENT``),
  :meth:`~CgroupTree.walk` (pre-order), and :meth:`~CgroupTree.read` /
  :meth:`~CgroupTree.write` for interface files, dispatched to the controller owning them;
* :class:`CgroupSubsys` -- ``struct cgroup_subsys``: a controller's name, its files
  (``struct cftype`` with ``CFTYPE_ONLY_ON_ROOT`` / ``CFTYPE_NOT_ON_ROOT``) and its
  ``css_online`` / ``css_offline`` / ``css_released`` callbacks;
* css references (:meth:`Cgroup.css_get` / :meth:`Cgroup.css_put`): a removed cgroup whose
  state is still referenced -- dmem charges hold a reference until they are uncharged -- stays
  *dying*: it is gone from :meth:`~CgroupTree.lookup` and :meth:`~CgroupTree.walk`, but
  ``css_for_each_descendant_pre`` (:meth:`CgroupTree.walk_css`) still visits it and its
  charges still count in its ancestors, as in the kernel.

Simplifications: every registered controller is enabled in every cgroup (no
``cgroup.subtree_control``, so no "no internal processes" rule); a task in no cgroup, or
``current`` being None (kernel context), counts as the root cgroup.

Errors are ``KernelError`` with the errno the syscall returns and a reason naming the path,
the file and the value.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pinlab.kernel.errno import Errno, KernelError
from pinlab.kernel.kernel import Task
from pinlab.policy.hierarchy import self_and_ancestors


class CfType(enum.Flag):
    """``CFTYPE_*`` placement flags of an interface file."""

    NONE = 0
    ONLY_ON_ROOT = enum.auto()
    NOT_ON_ROOT = enum.auto()


@dataclass(frozen=True, slots=True)
class CgroupFile:
    """``struct cftype``: one interface file, e.g. ``dmem.max``.

    ``read`` renders the file for a cgroup (``seq_show``); ``write`` parses what was written
    (``write``) and raises ``KernelError`` on bad input. A file without ``write`` is read-only
    (writing it is ``-EINVAL``, as kernfs returns for a file without a write op).
    """

    name: str
    read: Callable[[Cgroup], str] | None = None
    write: Callable[[Cgroup, str], None] | None = None
    flags: CfType = CfType.NONE

    def present_in(self, cgrp: Cgroup) -> bool:
        """Whether the file exists in ``cgrp`` (``cgroup_addrm_files`` placement rules)."""
        if self.flags & CfType.ONLY_ON_ROOT and not cgrp.is_root:
            return False
        return not (self.flags & CfType.NOT_ON_ROOT and cgrp.is_root)


class CgroupSubsys:
    """``struct cgroup_subsys``: a controller plugged into a :class:`CgroupTree`.

    Subclasses set :attr:`name`, return their files from :meth:`cftypes` and override the
    callbacks they need. The tree calls ``css_online`` for every cgroup that exists when the
    controller is registered and for every new one; ``css_offline`` on rmdir; and
    ``css_released`` once a removed cgroup's last reference is gone (``css_free``).
    """

    name: str = ""

    def cftypes(self) -> Sequence[CgroupFile]:
        """The controller's interface files."""
        return ()

    def css_online(self, cgrp: Cgroup) -> None:
        """``css_online``: ``cgrp`` was created (or existed at registration)."""

    def css_offline(self, cgrp: Cgroup) -> None:
        """``css_offline``: ``cgrp`` was removed; its state may still be referenced."""

    def css_released(self, cgrp: Cgroup) -> None:
        """``css_free``: the last reference to the removed ``cgrp`` is gone."""


SubsysT = TypeVar("SubsysT", bound=CgroupSubsys)


class Cgroup:
    """``struct cgroup`` with its css: name, parent, live children, tasks and references.

    ``refs`` counts css references held by controller state (a dmem charge holds one until it
    is uncharged); ``online`` turns False at rmdir. A removed cgroup is released -- and
    forgotten by its parent -- when it is offline, unreferenced and has no dying children.
    """

    __slots__ = ("_children", "_kids", "level", "name", "online", "parent", "refs", "tasks", "tree")

    def __init__(self, tree: CgroupTree, name: str, parent: Cgroup | None) -> None:
        self.tree = tree
        self.name = name
        self.parent = parent
        self.level: int = 0 if parent is None else parent.level + 1
        self._children: dict[str, Cgroup] = {}  # live, by name
        self._kids: list[Cgroup] = []  # live and dying, creation order (css->children)
        self.tasks: list[Task] = []
        self.online = True
        self.refs = 0

    @property
    def is_root(self) -> bool:
        return self.parent is None

    @property
    def path(self) -> str:
        """The path below the mount point: ``/`` for the root, ``/a/b`` below it."""
        if self.parent is None:
            return "/"
        parts: list[str] = []
        c: Cgroup | None = self
        while c is not None and c.parent is not None:
            parts.append(c.name)
            c = c.parent
        return "/" + "/".join(reversed(parts))

    @property
    def children(self) -> list[Cgroup]:
        """Live child cgroups in creation order."""
        return list(self._children.values())

    @property
    def populated(self) -> bool:
        """``cgroup.events`` populated: this cgroup or a live descendant has a task."""
        return bool(self.tasks) or any(c.populated for c in self._children.values())

    ancestors = self_and_ancestors
    """This cgroup and its ancestors, bottom-up."""

    def is_descendant_of(self, other: Cgroup) -> bool:
        """``cgroup_is_descendant``: ``other`` is this cgroup or one of its ancestors."""
        return any(c is other for c in self.ancestors())

    def css_get(self) -> None:
        """``css_get``: controller state now references this cgroup."""
        self.refs += 1

    def css_put(self) -> None:
        """``css_put``: drop a reference; the last one releases a removed cgroup.

        A put without a reference is the percpu_ref underflow WARN: recorded on the tree's
        :attr:`CgroupTree.warnings`, the count stays at 0.
        """
        if self.refs <= 0:
            self.tree.warnings.append(f"css_put on {self.path} without a reference")
            return
        self.refs -= 1
        if not self.online:
            self.tree._maybe_release(self)

    def __repr__(self) -> str:
        state = "" if self.online else " (dying)"
        return f"<cgroup {self.path}{state}>"


def _split(path: str) -> list[str]:
    return [part for part in path.strip().split("/") if part]


class CgroupTree:
    """The cgroup v2 hierarchy (one mount of ``cgroup2``) with its controllers.

    Core files in every cgroup: ``cgroup.procs`` (read: one pid per line; write: a pid, moving
    that task -- it must have been attached once so the tree knows it, else ``-ESRCH``) and
    ``cgroup.controllers`` (read-only, the registered controllers). ``warnings`` records
    what the kernel would WARN about (a css reference dropped twice).
    """

    __slots__ = ("_controllers", "_files", "_tasks", "root", "warnings")

    def __init__(self, controllers: Iterable[CgroupSubsys] = ()) -> None:
        self.root = Cgroup(self, "", None)
        self.warnings: list[str] = []
        self._controllers: dict[str, CgroupSubsys] = {}
        self._files: dict[str, CgroupFile] = {}
        self._tasks: dict[int, Task] = {}
        for f in (
            CgroupFile("cgroup.procs", self._procs_read, self._procs_write),
            CgroupFile("cgroup.controllers", self._controllers_read),
        ):
            self._files[f.name] = f
        for ctrl in controllers:
            self.register(ctrl)

    # -- controllers -----------------------------------------------------------------------------
    def register(self, ctrl: SubsysT) -> SubsysT:
        """Add a controller: its files appear, ``css_online`` runs for every existing cgroup.

        ``ValueError`` for a second controller of the same name or a file name already taken.
        """
        if not ctrl.name:
            raise ValueError(f"controller {ctrl!r} has no name")
        if ctrl.name in self._controllers:
            if self._controllers[ctrl.name] is ctrl:
                return ctrl
            raise ValueError(f"a controller named {ctrl.name!r} is already registered")
        files = list(ctrl.cftypes())
        for f in files:
            if f.name in self._files:
                raise ValueError(f"cgroup file {f.name!r} of {ctrl.name!r} already exists")
        self._controllers[ctrl.name] = ctrl
        for f in files:
            self._files[f.name] = f
        for cgrp in self.walk_css(self.root):
            if cgrp.online:
                ctrl.css_online(cgrp)
        return ctrl

    def controller(self, name: str) -> CgroupSubsys | None:
        """The registered controller called ``name``, if any."""
        return self._controllers.get(name)

    @property
    def controllers(self) -> list[CgroupSubsys]:
        return list(self._controllers.values())

    # -- lookup ----------------------------------------------------------------------------------
    def lookup(self, path: str | Cgroup) -> Cgroup:
        """The live cgroup at ``path`` (``/``, ``/a/b``; a relative path starts at the root).

        ``-ENOENT`` naming the first missing component.
        """
        if isinstance(path, Cgroup):
            if path.tree is not self or not path.online:
                raise KernelError(Errno.ENOENT, "cgroup_kn_lock_live", f"{path.path}: removed")
            return path
        cgrp = self.root
        for part in _split(path):
            child = cgrp._children.get(part)
            if child is None:
                where = cgrp.path.rstrip("/") + "/" + part
                raise KernelError(
                    Errno.ENOENT, "kernfs_iop_lookup", f"{where}: no such cgroup (in {path!r})"
                )
            cgrp = child
        return cgrp

    def exists(self, path: str) -> bool:
        try:
            self.lookup(path)
        except KernelError:
            return False
        return True

    def cgroup_of(self, task: object) -> Cgroup:
        """The cgroup ``task`` runs in: its ``task.cgroup`` if that is a live cgroup of this
        tree, otherwise (no task, no cgroup, another tree) the root."""
        cgrp = getattr(task, "cgroup", None) if task is not None else None
        if isinstance(cgrp, Cgroup) and cgrp.tree is self:
            return cgrp
        return self.root

    def walk(self, start: str | Cgroup = "/") -> Iterator[Cgroup]:
        """Live cgroups from ``start`` down, in pre-order (children in creation order)."""
        first = self.lookup(start)
        stack = [first]
        while stack:
            cgrp = stack.pop()
            yield cgrp
            stack.extend(reversed(list(cgrp._children.values())))

    def walk_css(self, start: Cgroup) -> Iterator[Cgroup]:
        """``css_for_each_descendant_pre``: like :meth:`walk` but dying (removed, still
        referenced) cgroups are visited too."""
        stack = [start]
        while stack:
            cgrp = stack.pop()
            yield cgrp
            stack.extend(reversed(cgrp._kids))

    # -- mkdir / rmdir ---------------------------------------------------------------------------
    def mkdir(self, path: str) -> Cgroup:
        """``cgroup_mkdir``: create the cgroup at ``path``; its parent must exist.

        ``-ENOENT`` for a missing parent; ``-EEXIST`` for an existing cgroup, the root, ``.``,
        ``..`` or the name of an interface file; ``-EINVAL`` for a name with a newline.
        """
        parts = _split(path)
        if not parts:
            raise KernelError(Errno.EEXIST, "cgroup_mkdir", f"{path!r}: the root exists")
        name = parts[-1]
        if "\n" in name:
            raise KernelError(Errno.EINVAL, "cgroup_mkdir", f"{path!r}: newline in name")
        if name in (".", "..") or name in self._files:
            raise KernelError(Errno.EEXIST, "cgroup_mkdir", f"{path!r}: {name!r} exists")
        parent = self.lookup("/" + "/".join(parts[:-1]))
        if name in parent._children:
            raise KernelError(Errno.EEXIST, "cgroup_mkdir", f"{path!r} already exists")
        cgrp = Cgroup(self, name, parent)
        parent._children[name] = cgrp
        parent._kids.append(cgrp)
        for ctrl in self._controllers.values():
            ctrl.css_online(cgrp)
        return cgrp

    def rmdir(self, path: str | Cgroup) -> None:
        """``cgroup_rmdir``: remove an empty cgroup (``-EBUSY`` with processes or children;
        the root is ``-EBUSY`` too). Every controller's ``css_offline`` runs -- dmem resets
        the cgroup's min/low/max (P-32). Charges it still holds keep it *dying* until they
        are returned."""
        cgrp = self.lookup(path)
        if cgrp.is_root:
            raise KernelError(Errno.EBUSY, "cgroup_rmdir", "/: the root cannot be removed")
        if cgrp.tasks:
            pids = ", ".join(str(t.pid) for t in cgrp.tasks)
            raise KernelError(Errno.EBUSY, "cgroup_rmdir", f"{cgrp.path} has processes ({pids})")
        if cgrp._children:
            names = ", ".join(cgrp._children)
            raise KernelError(Errno.EBUSY, "cgroup_rmdir", f"{cgrp.path} has children ({names})")
        parent = cgrp.parent
        assert parent is not None
        del parent._children[cgrp.name]
        cgrp.online = False
        for ctrl in self._controllers.values():
            ctrl.css_offline(cgrp)
        self._maybe_release(cgrp)

    def _maybe_release(self, cgrp: Cgroup) -> None:
        """Release a removed cgroup once nothing references it (then maybe its parent)."""
        while cgrp.parent is not None and not cgrp.online and cgrp.refs == 0 and not cgrp._kids:
            parent = cgrp.parent
            if cgrp in parent._kids:
                parent._kids.remove(cgrp)
            for ctrl in self._controllers.values():
                ctrl.css_released(cgrp)
            cgrp = parent

    # -- tasks -----------------------------------------------------------------------------------
    def attach(self, task: Task, path: str | Cgroup = "/") -> Cgroup:
        """``cgroup_attach_task``: move ``task`` into the cgroup at ``path``.

        Sets ``task.cgroup`` to the :class:`Cgroup`. Charges already made stay where they
        were (dmem charges belong to the pool that paid, not to the task).
        """
        dst = self.lookup(path)
        old = task.cgroup
        if isinstance(old, Cgroup) and old.tree is self and task in old.tasks:
            old.tasks.remove(task)
        dst.tasks.append(task)
        task.cgroup = dst
        self._tasks[task.pid] = task
        return dst

    def exit(self, task: Task) -> None:
        """``cgroup_exit``: the task no longer populates its cgroup (``task.cgroup`` stays)."""
        cgrp = task.cgroup
        if isinstance(cgrp, Cgroup) and cgrp.tree is self and task in cgrp.tasks:
            cgrp.tasks.remove(task)
        self._tasks.pop(task.pid, None)

    # -- interface files -------------------------------------------------------------------------
    def _file(self, cgrp: Cgroup, filename: str, function: str) -> CgroupFile:
        f = self._files.get(filename)
        if f is None or not f.present_in(cgrp):
            where = cgrp.path.rstrip("/") + "/" + filename
            raise KernelError(Errno.ENOENT, function, f"{where}: no such file")
        return f

    def files(self, path: str | Cgroup = "/") -> list[str]:
        """The interface files present in the cgroup at ``path`` (``ls``), sorted."""
        cgrp = self.lookup(path)
        return sorted(name for name, f in self._files.items() if f.present_in(cgrp))

    def read(self, path: str | Cgroup, filename: str) -> str:
        """Read an interface file (``-ENOENT`` when it does not exist in that cgroup)."""
        cgrp = self.lookup(path)
        f = self._file(cgrp, filename, "cgroup_seqfile_show")
        if f.read is None:
            where = cgrp.path.rstrip("/") + "/" + filename
            raise KernelError(Errno.EINVAL, "kernfs_fop_read_iter", f"{where} is write-only")
        return f.read(cgrp)

    def write(self, path: str | Cgroup, filename: str, text: str) -> None:
        """Write ``text`` to an interface file; the owning controller parses it.

        ``-ENOENT`` when the file does not exist in that cgroup, ``-EINVAL`` for a read-only
        file, otherwise whatever the controller's parser raises.
        """
        cgrp = self.lookup(path)
        f = self._file(cgrp, filename, "cgroup_file_write")
        if f.write is None:
            where = cgrp.path.rstrip("/") + "/" + filename
            raise KernelError(
                Errno.EINVAL, "kernfs_fop_write_iter", f"{where} is read-only (wrote {text!r})"
            )
        f.write(cgrp, text)

    def _procs_read(self, cgrp: Cgroup) -> str:
        return "".join(f"{t.pid}\n" for t in sorted(cgrp.tasks, key=lambda t: t.pid))

    def _procs_write(self, cgrp: Cgroup, text: str) -> None:
        value = text.strip()
        try:
            pid = int(value, 10)
        except ValueError:
            raise KernelError(
                Errno.EINVAL, "cgroup_procs_write", f"{cgrp.path}/cgroup.procs: bad pid {text!r}"
            ) from None
        task = self._tasks.get(pid)
        if task is None:
            raise KernelError(
                Errno.ESRCH, "cgroup_procs_write", f"{cgrp.path}/cgroup.procs: no task {pid}"
            )
        self.attach(task, cgrp)

    def _controllers_read(self, cgrp: Cgroup) -> str:
        return " ".join(self._controllers) + "\n"

    def __repr__(self) -> str:
        return f"<cgroup tree: {', '.join(self._controllers) or 'no controllers'}>"
