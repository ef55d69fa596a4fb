"""Software prefetch (LLVM's ``llvm.prefetch``) for kernels that know which cells they
will write next while other work is still to be done before it."""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch_write(typingctx, arr, i, j):
    """Ask for the cache line of arr[i, j, 0] (a 3-d array, i and j inside it) in view of
    a write: a hint that changes no value."""
    if not (isinstance(arr, types.Array) and arr.ndim == 3):
        return None
    sig = types.void(arr, i, j)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        zero = context.get_constant(types.intp, 0)
        ii = context.cast(builder, args[1], signature.args[1], types.intp)
        jj = context.cast(builder, args[2], signature.args[2], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [ii, jj, zero])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        # write (1), keep in all cache levels (3), data cache (1)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 1), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen
