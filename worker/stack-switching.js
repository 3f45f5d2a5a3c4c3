// stack-switching.js -- a runtime restored from a memory image is given this engine's word on
// stack switching (JSPI), not the word of the engine that made the image.
//
// Two things decided as Python starts live in the wasm heap, so an image carries the word of the
// engine that took it (setup's Node 20: no JSPI, no wasm GC) into every engine that restores it,
// while the rest of JSPI (Module.jspiSupported, the Suspending wrappers, the promising entry
// points) is JavaScript the restoring instance makes afresh from its own engine:
// - Pyodide's C core points the `run_sync` method's PyMethodDef (_pyodide_core) at `run_sync` or
//   at `run_sync_not_supported` (RuntimeError "WebAssembly stack switching not supported in this
//   JavaScript runtime").  asyncio.run() and run_until_complete in a cell's synchronous code,
//   Pyodide's time.sleep and run_sync(promise) all go through that method.
// - CPython's call trampoline (_PyRuntime's emscripten trampoline, set by a pre-run hook of
//   pyodide.asm.mjs, then overwritten by the restored heap): 0 means every call through a C
//   function pointer passes a JavaScript frame, which JSPI cannot suspend (a fatal SuspendError);
//   where the engine can, a loaded runtime calls through a tiny wasm module instead.
// Where the engine has JSPI both are put as a loaded runtime has them (the trampoline module is
// the one pyodide.asm.mjs builds, read from its source); where it has none, the method is pointed
// at run_sync_not_supported and the JavaScript trampoline stays: a restored kernel does what a
// loaded one does.
//
//   matchStackSwitching(py, readRuntimeScript) → Promise<'kept' | 'switched on' | 'switched off'>
//       py: the pyodide API object right after the restore; readRuntimeScript() → Promise of
//       pyodide.asm.mjs's text (read only where the engine has JSPI).  Rejects, writing nothing,
//       when the runtime is not laid out as this expects (a Pyodide of another shape, an image
//       made with the wasm trampoline): the caller then loads instead of restoring.
export async function matchStackSwitching(py, readRuntimeScript) {
  const M = py._module;
  const canSwitch = !!M.jspiSupported;
  const want = canSwitch ? M._run_sync : M._run_sync_not_supported;
  const other = canSwitch ? M._run_sync_not_supported : M._run_sync;
  if (typeof want !== 'function' || typeof other !== 'function' || !M.HEAPU32 || typeof M.getFunctionAddress !== 'function') {
    throw new Error("Pyodide's run_sync functions are not where they were");
  }
  // The builtin's object (PyCFunctionObject, wasm32: refcount, type, then m_ml, the PyMethodDef*)
  // and its PyMethodDef (ml_name, ml_meth: a function table index, ml_flags, ml_doc).
  // (An expression: nothing is bound in Python's globals.)
  const [self, type] = py.runPython('(lambda f: f"{id(f)} {id(type(f))}")(__import__("_pyodide_core").run_sync)').split(' ').map(Number);
  const u32 = (addr) => M.HEAPU32[addr >>> 2];
  if (u32(self + 4) !== type) throw new Error('run_sync is not laid out as a builtin function here');
  const def = u32(self + 8);
  if (M.UTF8ToString(u32(def)) !== 'run_sync') throw new Error("run_sync's method definition is not where it was");
  const now = M.getWasmTableEntry(u32(def + 4));
  if (same(now, want)) return 'kept';
  if (!same(now, other)) throw new Error("run_sync's method is neither of Pyodide's two");
  const index = M.getFunctionAddress(want);
  if (!index) throw new Error("run_sync's function is not in the function table");
  if (canSwitch) await useWasmTrampoline(M, await readRuntimeScript());
  M.HEAPU32[(def + 4) >>> 2] = index;
  return canSwitch ? 'switched on' : 'switched off';
}

// One wasm function of the runtime, as a table entry and as an export: the same object in V8 and
// SpiderMonkey; JavaScriptCore may wrap it twice, and both wrappers are named by its index.
const same = (a, b) => a === b || (typeof a === 'function' && typeof b === 'function' && a.name === b.name && a.length === b.length);

// CPython's call trampoline as a loaded runtime in this engine has it (pyodide.asm.mjs's
// getPyEMTrampolinePtr: a tiny wasm module over the runtime's table and memory, added to the table).
async function useWasmTrampoline(M, script) {
  if (typeof M.__PyRuntime !== 'number' || typeof M.__PyEM_EMSCRIPTEN_TRAMPOLINE_OFFSET !== 'number' || !M.memory || !M.wasmTable || typeof M.addFunction !== 'function') {
    throw new Error("CPython's trampoline is not where it was");
  }
  const at = (M.__PyRuntime + M.HEAP32[M.__PyEM_EMSCRIPTEN_TRAMPOLINE_OFFSET >>> 2]) >>> 2;
  if (M.HEAP32[at] !== 0) throw new Error('the image was made with a wasm trampoline');
  const found = [...String(script).matchAll(/getWasmTrampolineModule\(\)\{return new WebAssembly\.Module\(hexStringToUTF8Array\("([0-9a-f]+)"\)\)/g)];
  if (found.length !== 1) throw new Error("pyodide.asm.mjs's trampoline module is not where it was");
  const hex = found[0][1];
  const bytes = new Uint8Array(hex.length >> 1);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.substr(2 * i, 2), 16);
  const instance = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env: { __indirect_function_table: M.wasmTable, memory: M.memory } });
  const ptr = M.addFunction(instance.exports.trampoline_call);
  if (!ptr) throw new Error('the trampoline could not be added to the function table');
  M.HEAP32[at] = ptr;
}
