"""Triton 3.6's interpreter turns scalar tensors into ints with int(ndarray of shape (1,)), which
NumPy >= 2.4 rejects (triton-lang/triton#9171); this breaks `range(lo, hi)` with tensor bounds."""


def patch_interpreter_for_numpy_2_4() -> None:
    import torch

    if torch.cuda.is_available():
        return
    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_pagoda_patched", False):
        return

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._pagoda_patched = True
    interpreter._patch_lang_tensor = patched
