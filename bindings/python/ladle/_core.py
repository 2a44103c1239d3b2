"""Errors, partitions, layouts, tensors and operators: the objects every
other part of the package is made of."""

import atexit
import ctypes
import itertools
import re
import weakref
from ctypes import byref, c_double, c_int, c_int64, c_void_p

import numpy as np

from . import _capi
from ._capi import MAX_NDIM, SELF, i64_array, int_array

# mpi4py first: importing mpi4py.MPI loads (and initialises) the MPI the
# library below must share.
from mpi4py import MPI  # noqa: E402

lib = None  # set by _init_library() at import


# ---- MPI match ---------------------------------------------------------------

def _mpi_family(text):
    """(family, version) of an MPI library string (ladle_mpi_library() or
    MPI.Get_library_version()). MPICH's derivatives (Intel MPI, MVAPICH,
    Cray MPICH) keep its handles and constants: one family, as ladle's own
    check has it."""
    t = text.strip()
    low = t.lower()
    if "open mpi" in low or "openmpi" in low:
        family = "Open MPI"
    elif any(k in low for k in ("mpich", "intel", "mvapich")):
        family = "MPICH"
    else:
        family = t.split()[0] if t else "unknown"
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", t)
    return family, (m.group(0) if m else "")


def check_mpi_match(ladle_mpi, python_mpi):
    """None if libladle's MPI (ladle_mpi) and mpi4py's (python_mpi) can share
    a process (the same family of binary interface), else the reason."""
    lf, _ = _mpi_family(ladle_mpi)
    pf, pv = _mpi_family(python_mpi)
    if lf == pf:
        return None
    first_line = python_mpi.strip().splitlines()[0].split(",")[0] if python_mpi.strip() \
        else "unknown"
    return ("ladle: libladle was built with %s but mpi4py runs %s (%s); one process cannot "
            "hold two MPIs. Build the matching libladle with `make python` (it uses the "
            "MPI of Debian's mpi4py, Open MPI) or point LADLE_LIBRARY at one built "
            "with mpi4py's MPI." % (ladle_mpi.strip(), ("%s %s" % (pf, pv)).strip(),
                                    first_line.strip()))


def _init_library():
    global lib
    path = _capi.find_library()
    loaded = _capi.load(path)
    # Before any other call: only ladle_mpi_library(), which reads a string
    # compiled into the library and touches no MPI.
    if isinstance(loaded.ladle_mpi_library, _capi._Missing):
        raise ImportError("ladle: %s has no ladle_mpi_library(): too old a libladle for this "
                          "package (rebuild with `make python`)" % path)
    ladle_mpi = loaded.ladle_mpi_library().decode()
    reason = check_mpi_match(ladle_mpi, MPI.Get_library_version())
    if reason:
        raise ImportError(reason + " [library: %s]" % path)
    lib = loaded


# ---- errors -------------------------------------------------------------------

class LadleError(Exception):
    """A ladle call returned a nonzero status. .status is the code,
    .name its symbol (LADLE_ERR_SHAPE), .message ladle's message."""

    def __init__(self, status, message=None, name=None):
        self.status = int(status)
        self.name = name or status_name(status)
        self.message = message if message is not None else ""
        super().__init__("%s: %s" % (self.name, self.message) if self.message else self.name)


def status_name(status):
    return lib.ladle_status_name(int(status)).decode()


def status_string(status):
    return lib.ladle_status_string(int(status)).decode()


# status codes by name, from the library
ERR = {}


def _fill_status_names():
    for code in range(0, 64):
        name = status_name(code)
        if not name.startswith("LADLE_"):
            continue
        ERR[name] = code


def check(status):
    """Raise LadleError for a nonzero status, with the calling thread's
    last message."""
    if status != 0:
        msg = lib.ladle_error_message()
        msg = msg.decode(errors="replace") if msg else ""
        raise LadleError(status, msg or status_string(status))
    return status


def _error(name, message):
    return LadleError(ERR.get(name, 1), message, name)


# ---- lifetime -----------------------------------------------------------------

# Every live handle, so that interpreter exit destroys them before mpi4py
# finalizes MPI (a partition frees its communicators).
# Destroyed newest first: an object is created after everything it uses (a
# layer after its partitions and layouts), so the reverse of creation order
# never frees a partition under a layer that still needs it (a set's order
# did, and the freed memory crashed the interpreter's final collection).
_live = {}  # serial -> weakref, in creation order
_serial = itertools.count()
_finalizing = [False]


def _release_all():
    for key in sorted(_live, reverse=True):
        obj = _live.get(key)
        obj = obj() if obj is not None else None
        if obj is None:
            continue
        try:
            obj.close()
        except Exception:
            pass
    _live.clear()
    _finalizing[0] = True


atexit.register(_release_all)


class _Handle:
    """A ladle object: a handle, its destroy function, and the Python
    objects it must keep alive (partitions, layouts, arrays, callbacks).

    Some ladle objects must be destroyed before the one they belong to (a
    context before its layer). The garbage collector finalizes a cycle in
    any order, so an owner destroys such dependents itself first: each
    registers (destroy function, shared handle cell) with its owner, and
    destroying through the shared cell leaves NULL for the dependent's own
    close to skip. A container (sequential, network) does the same for the
    dependents of the layers it holds."""

    _destroy = None  # name of the ladle_*_destroy function

    def _adopt(self, h, keep=()):
        self._h = c_void_p(h.value if isinstance(h, c_void_p) else h)
        self._keep = list(keep)
        self._owned = True
        self._children = {}
        self._contains = []
        self._parent = None
        self._serial = next(_serial)
        _live[self._serial] = weakref.ref(self)

    def _depend_on(self, owner):
        """Destroy this object before owner's ladle object goes."""
        owner._children[id(self)] = (self._destroy, self._h)
        self._parent = owner

    @property
    def handle(self):
        h = getattr(self, "_h", None)
        if h is None or not h.value:
            raise ValueError("ladle: %s is closed" % type(self).__name__)
        return h

    def _close_children(self):
        children = getattr(self, "_children", {})
        for destroy, h in list(children.values()):
            if h.value:
                getattr(lib, destroy)(byref(h))
        children.clear()
        for obj in getattr(self, "_contains", ()):
            obj._close_children()

    def close(self):
        """Destroy the ladle object now (it is also destroyed when collected)."""
        h = getattr(self, "_h", None)
        if h is None or not h.value:
            return
        alive = not _finalizing[0] and not MPI.Is_finalized()
        if self._owned and alive:
            self._close_children()
            getattr(lib, self._destroy)(byref(h))
        parent = getattr(self, "_parent", None)
        if parent is not None:
            parent._children.pop(id(self), None)
        self._h = c_void_p(None)
        self._keep = []
        _live.pop(getattr(self, "_serial", None), None)

    def _disown(self, container=None):
        """Another ladle object (a container, a network) owns the handle now."""
        self._owned = False
        if container is not None:
            container._contains.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# ---- dtypes -------------------------------------------------------------------

_NP_TO_LADLE = {np.dtype(np.float32): _capi.F32, np.dtype(np.float64): _capi.F64,
                np.dtype(np.int64): _capi.I64, np.dtype(np.float16): _capi.F16}
_LADLE_TO_NP = {v: k for k, v in _NP_TO_LADLE.items()}
# numpy has no bfloat16: a bf16 tensor's elements show as their raw bits
_LADLE_TO_NP[_capi.BF16] = np.dtype(np.uint16)
_DEVICES = {"cpu": _capi.CPU, "cuda": _capi.CUDA, "guarded": _capi.GUARDED}


def ladle_dtype(dtype):
    """The ladle dtype code of a numpy dtype (float32, float64, float16, int64)."""
    dt = np.dtype(dtype)
    if dt not in _NP_TO_LADLE:
        raise _error("LADLE_ERR_DTYPE", "ladle handles float32, float64, float16 (and int64 "
                     "labels), not %s" % dt)
    return _NP_TO_LADLE[dt]


def numpy_dtype(code):
    return _LADLE_TO_NP[code]


def ladle_device(device):
    if isinstance(device, int):
        return device
    try:
        return _DEVICES[device]
    except KeyError:
        raise _error("LADLE_ERR_DEVICE", "unknown device %r (cpu, cuda, guarded)" % (device,))


def _shape(values):
    return tuple(int(v) for v in values)


# ---- partitions -----------------------------------------------------------------

class Partition(_Handle):
    """A Cartesian grid of ranks of an mpi4py communicator:
    Partition(comm, shape, ranks=None). ranks lists the parent ranks that
    form the grid (all of comm's first prod(shape) ranks by default); ranks
    outside it get an inactive partition. Collective over comm."""

    _destroy = "ladle_partition_destroy"

    def __init__(self, comm, shape, ranks=None, _handle=None):
        if _handle is not None:
            self._adopt(_handle)
            return
        shape = _shape(shape)
        h = c_void_p()
        r = int_array(ranks) if ranks is not None else None
        check(lib.ladle_partition_create(_capi.Comm.of(comm), len(shape), int_array(shape), r,
                                           byref(h)))
        self._adopt(h)

    def sub(self, remain):
        """The sub-grid through this rank keeping the dimensions where
        remain is true. Collective over the partition."""
        h = c_void_p()
        check(lib.ladle_partition_create_sub(self.handle, int_array([int(bool(x)) for x in remain]),
                                             byref(h)))
        return Partition(None, None, _handle=h)

    def subset(self, shape, ranks):
        """A partition over some members (ranks are partition ranks)."""
        shape = _shape(shape)
        h = c_void_p()
        check(lib.ladle_partition_create_subset(self.handle, len(shape), int_array(shape),
                                                int_array(ranks), byref(h)))
        return Partition(None, None, _handle=h)

    @property
    def active(self):
        return bool(lib.ladle_partition_active(self.handle))

    @property
    def ndim(self):
        return lib.ladle_partition_ndim(self.handle)

    @property
    def shape(self):
        p = lib.ladle_partition_shape(self.handle)
        return tuple(p[i] for i in range(self.ndim))

    @property
    def size(self):
        return lib.ladle_partition_size(self.handle)

    @property
    def rank(self):
        return lib.ladle_partition_rank(self.handle)

    @property
    def coords(self):
        p = lib.ladle_partition_coords(self.handle)
        return tuple(p[i] for i in range(self.ndim)) if p else None

    @property
    def comm(self):
        """The partition's private communicator as an mpi4py Comm (members
        only; MPI.COMM_NULL elsewhere). Borrowed: valid while the partition
        lives; never free it."""
        return MPI.Comm.f2py(lib.ladle_partition_comm(self.handle).fortran)

    def __repr__(self):
        return "Partition(shape=%s, rank=%s)" % (self.shape, self.rank)


# ---- layouts ------------------------------------------------------------------

class Layout(_Handle):
    """How a global shape is decomposed over a partition.
    Layout(p, global_shape): balanced blocks; Layout.split(p, shape, sizes)
    rectilinear; Layout.block(p, block_shape) a whole block per member.
    Local to create (every rank computes the same table)."""

    _destroy = "ladle_layout_destroy"

    def __init__(self, partition, global_shape=None, _handle=None, _keep=()):
        if _handle is not None:
            self._adopt(_handle, _keep)
            return
        shape = _shape(global_shape)
        h = c_void_p()
        check(lib.ladle_layout_create_balanced(partition.handle, len(shape), i64_array(shape),
                                               byref(h)))
        self._adopt(h, [partition])

    @classmethod
    def split(cls, partition, global_shape, sizes):
        shape = _shape(global_shape)
        tables = [i64_array(s) for s in sizes]
        ptrs = (_capi.i64_p * len(tables))(*[ctypes.cast(t, _capi.i64_p) for t in tables])
        h = c_void_p()
        check(lib.ladle_layout_create_split(partition.handle, len(shape), i64_array(shape), ptrs,
                                            byref(h)))
        return cls(None, _handle=h, _keep=[partition])

    @classmethod
    def block(cls, partition, block_shape):
        shape = _shape(block_shape)
        h = c_void_p()
        check(lib.ladle_layout_create_block(partition.handle, len(shape), i64_array(shape),
                                            byref(h)))
        return cls(None, _handle=h, _keep=[partition])

    @classmethod
    def _borrowed(cls, h, owner):
        """A layout owned by another object (an op's x layout)."""
        obj = cls(None, _handle=c_void_p(h), _keep=[owner])
        obj._disown()
        return obj

    @property
    def ndim(self):
        return lib.ladle_layout_ndim(self.handle)

    @property
    def global_shape(self):
        p = lib.ladle_layout_global_shape(self.handle)
        return tuple(p[i] for i in range(self.ndim))

    def box(self, rank=SELF):
        """(offset, shape) of rank's block (the calling rank by default)."""
        n = self.ndim
        off, shp = (c_int64 * MAX_NDIM)(), (c_int64 * MAX_NDIM)()
        check(lib.ladle_layout_box(self.handle, rank, off, shp))
        return tuple(off[:n]), tuple(shp[:n])

    @property
    def local_shape(self):
        return self.box()[1]

    def slices(self, rank=SELF):
        """The calling rank's block as a tuple of slices of the global array."""
        off, shp = self.box(rank)
        return tuple(slice(o, o + s) for o, s in zip(off, shp))


# ---- tensors --------------------------------------------------------------------

class Tensor(_Handle):
    """One rank's local shard as a ladle_tensor. Tensor.wrap(array) wraps a
    numpy array without copying (and keeps it alive); .numpy() views the
    data as a numpy array (the wrapped array itself for a wrap)."""

    _destroy = "ladle_tensor_destroy"

    def __init__(self, _handle, keep=(), array=None, owned=True):
        self._adopt(_handle, keep)
        self._array = array
        if not owned:
            self._disown()

    @classmethod
    def wrap(cls, array, device="cpu"):
        """Wrap a float32, float64 (or int64: class labels) numpy array,
        zero-copy. Any non-negative element strides are passed to ladle,
        which refuses them where its math cannot take them; negative or
        unaligned strides are refused here."""
        if not isinstance(array, np.ndarray):
            raise TypeError("ladle: Tensor.wrap takes a numpy array, not %s"
                            % type(array).__name__)
        code = ladle_dtype(array.dtype)
        item = array.dtype.itemsize
        if array.ndim > MAX_NDIM:
            raise _error("LADLE_ERR_ARG", "%d dimensions: ladle handles up to %d"
                         % (array.ndim, MAX_NDIM))
        strides = []
        for s in array.strides:
            if s < 0 or s % item:
                raise _error("LADLE_ERR_ARG", "numpy strides %s: ladle takes non-negative "
                             "strides in whole elements (pass np.ascontiguousarray(a))"
                             % (array.strides,))
            strides.append(s // item)
        h = c_void_p()
        ptr = array.ctypes.data if array.size else None
        check(lib.ladle_tensor_wrap(code, ladle_device(device), array.ndim,
                                    i64_array(array.shape), i64_array(strides), ptr, byref(h)))
        return cls(h, array=array)

    @classmethod
    def zeros(cls, shape, dtype=np.float64):
        """A numpy-backed tensor of zeros (wrapped, so .numpy() is the array)."""
        return cls.wrap(np.zeros(_shape(shape), dtype=dtype))

    @classmethod
    def _borrowed(cls, h, owner):
        """A tensor owned by ladle (a parameter, a gradient), kept alive
        through its owner."""
        return cls(c_void_p(h), keep=[owner], owned=False)

    @property
    def dtype(self):
        return numpy_dtype(lib.ladle_tensor_dtype(self.handle))

    @property
    def ndim(self):
        return lib.ladle_tensor_ndim(self.handle)

    @property
    def shape(self):
        p = lib.ladle_tensor_shape(self.handle)
        return tuple(p[i] for i in range(self.ndim)) if self.ndim else ()

    @property
    def strides(self):
        """In elements."""
        p = lib.ladle_tensor_strides(self.handle)
        return tuple(p[i] for i in range(self.ndim)) if self.ndim else ()

    @property
    def device(self):
        return lib.ladle_device_name(lib.ladle_tensor_device(self.handle)).decode()

    def fill(self, value):
        """Set every element (through ladle, on the tensor's device)."""
        check(lib.ladle_tensor_fill(self.handle, float(value)))

    def convert_from(self, src):
        """self = src converted elementwise (f32, f64, f16, bf16; rounded to
        nearest even, once), on one device; shapes must match."""
        src = as_tensor(src)  # alive until the call returns
        check(lib.ladle_tensor_convert(self.handle, src.handle))

    def fill_random(self, seed, stream=0):
        """Uniform values in [-1, 1) from ladle's counter-based generator."""
        check(lib.ladle_tensor_fill_random(self.handle, seed, stream))

    def dot(self, other):
        """sum(self * other), accumulated in double by ladle."""
        r = c_double()
        other = as_tensor(other)  # alive until the call returns
        check(lib.ladle_tensor_dot(self.handle, other.handle, byref(r)))
        return r.value

    @property
    def data_ptr(self):
        return lib.ladle_tensor_data(self.handle) or 0

    def numpy(self):
        """The data as a numpy array, without copying (CPU tensors)."""
        if self._array is not None:
            return self._array
        return tensor_view(self.handle, owner=self)

    def __array__(self, dtype=None):
        a = self.numpy()
        return a.astype(dtype) if dtype is not None else a

    def __repr__(self):
        return "Tensor(shape=%s, dtype=%s)" % (self.shape, self.dtype)


def tensor_view(h, owner=None):
    """A numpy view of the ladle_tensor at handle h (CPU memory), without
    copying. owner (if given) is kept alive by the view."""
    dev = lib.ladle_tensor_device(h)
    if dev != _capi.CPU:
        raise _error("LADLE_ERR_DEVICE", "a %s tensor has no numpy view"
                     % lib.ladle_device_name(dev).decode())
    dt = numpy_dtype(lib.ladle_tensor_dtype(h))
    n = lib.ladle_tensor_ndim(h)
    sp, st = lib.ladle_tensor_shape(h), lib.ladle_tensor_strides(h)
    shape = tuple(sp[i] for i in range(n))
    strides = tuple(st[i] * dt.itemsize for i in range(n))
    ptr = lib.ladle_tensor_data(h)
    if not ptr or int(np.prod(shape, dtype=np.int64)) == 0:
        return np.zeros(shape, dtype=dt)
    span = 1 + sum((s - 1) * t for s, t in zip(shape, strides) if s > 0) // dt.itemsize \
        if n else 1
    buf = (ctypes.c_char * (span * dt.itemsize)).from_address(ptr)
    # the view's base chain ends at buf, which keeps the owner alive
    buf._ladle_owner = owner
    base = np.frombuffer(buf, dtype=dt, count=span)
    return np.lib.stride_tricks.as_strided(base, shape=shape, strides=strides)


def as_tensor(x, what="tensor", output=False):
    """x as a Tensor (wrapping a numpy array without copying). output: ladle
    writes into it, so a read-only array is refused."""
    if isinstance(x, np.ndarray) and output and not x.flags.writeable:
        raise _error("LADLE_ERR_ARG", "%s is a read-only numpy array; ladle writes into it"
                     % what)
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return Tensor.wrap(x)
    raise TypeError("ladle: %s must be a numpy array or a ladle.Tensor, not %s"
                    % (what, type(x).__name__))


def _th(x):
    return None if x is None else x.handle


# ---- operators ------------------------------------------------------------------

class Op(_Handle):
    """A ladle operator: y = F x (forward) and dx = F* dy (adjoint).
    forward/adjoint take numpy arrays or Tensors; pass y (dx) to write into
    it, or leave it out to get a new array of this rank's shape. Collective
    over the op's ranks, as in C. Use it as a context manager or close() it
    to free it at once."""

    _destroy = "ladle_op_destroy"

    def __init__(self, _handle, keep=()):
        self._adopt(_handle, keep)

    def _out(self, shape, out):
        if out is None:
            return np.zeros(shape, dtype=self.dtype)
        return out

    def forward(self, x, y=None):
        y = self._out(self.y_shape, y)
        xt, yt = as_tensor(x, "x"), as_tensor(y, "y", True)
        check(lib.ladle_op_forward(self.handle, xt.handle, yt.handle))
        return y

    def adjoint(self, dy, dx=None):
        dx = self._out(self.x_shape, dx)
        dyt, dxt = as_tensor(dy, "dy"), as_tensor(dx, "dx", True)
        check(lib.ladle_op_adjoint(self.handle, dyt.handle, dxt.handle))
        return dx

    __call__ = forward

    def _shape_of(self, fn):
        n = c_int()
        s = (c_int64 * MAX_NDIM)()
        check(fn(self.handle, byref(n), s))
        return tuple(s[: n.value])

    @property
    def x_shape(self):
        """This rank's local shape of x (zero volume where it holds none)."""
        return self._shape_of(lib.ladle_op_x_shape)

    @property
    def y_shape(self):
        return self._shape_of(lib.ladle_op_y_shape)

    @property
    def x_layout(self):
        h = lib.ladle_op_x_layout(self.handle)
        return Layout._borrowed(h, self) if h else None

    @property
    def y_layout(self):
        h = lib.ladle_op_y_layout(self.handle)
        return Layout._borrowed(h, self) if h else None

    @property
    def dtype(self):
        return numpy_dtype(lib.ladle_op_dtype(self.handle))

    @property
    def name(self):
        return lib.ladle_op_name(self.handle).decode()

    @property
    def kind(self):
        return lib.ladle_op_kind_name(lib.ladle_op_kind_of(self.handle)).decode()

    @property
    def active(self):
        return bool(lib.ladle_op_active(self.handle))

    @property
    def workspace_bytes(self):
        return lib.ladle_op_workspace_bytes(self.handle)

    def __repr__(self):
        if getattr(self, "_h", None) is None or not self._h.value:
            return "<ladle.%s (closed)>" % type(self).__name__
        return "<ladle.%s %s x%s -> y%s>" % (type(self).__name__, self.name, self.x_shape,
                                             self.y_shape)


# ---- checks ---------------------------------------------------------------------

def adjoint_test(op, seed=0, full=False):
    """The dot-product test of a linear op: the mismatch
    |<Fx,y> - <x,F*y>| / max(|<Fx,y>|, |<x,F*y>|), the same on every rank
    (full=True: (mismatch, <Fx,y>, <x,F*y>)). Collective over the op's ranks."""
    r = _capi.ladle_adjoint_result()
    check(lib.ladle_adjoint_test(op.handle, seed, byref(r)))
    return (r.mismatch, r.fx_y, r.x_fty) if full else r.mismatch


def adjoint_tolerance(dtype):
    """What ladle's own tests accept: 1e-13 for f64, 1e-5 for f32."""
    return lib.ladle_adjoint_tolerance(ladle_dtype(dtype))


def gradient_test(op, seed=0, samples=16, full=False):
    """The finite-difference test of a (sequential) layer's backward: the
    worst relative error over the sampled input and parameter entries
    (full=True: (input_error, [per-parameter errors])). Local."""
    r = _capi.ladle_gradient_result()
    check(lib.ladle_gradient_test(op.handle, seed, samples, byref(r)))
    worst = max(r.input_error, r.max_param_error if r.nparams else 0.0)
    if full:
        return r.input_error, [lib.ladle_gradient_result_param_error(byref(r), i)
                               for i in range(r.nparams)]
    return worst


def version():
    return lib.ladle_version().decode()


def mpi_library():
    """The MPI libladle was built with ("Open MPI 4.1.4")."""
    return lib.ladle_mpi_library().decode()


def set_num_threads(n):
    check(lib.ladle_set_num_threads(int(n)))
