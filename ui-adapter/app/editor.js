// editor.js -- the code editor of the reference app: CodeMirror 6 with Lezer Python (highlighting,
// completion from the code's own names first, then a small builtin reference, Python's keywords
// and builtins, then snippets; hover signatures; syntax diagnostics from the parse tree; 4-space
// indents) and Ruby and Lua legacy stream modes for viewing code in those languages (token colours
// only, 2-space indents: no diagnostics, no run; switching to them clears Python's diagnostics).
// Ctrl/Cmd+Enter calls onRun.  Everything happens in the browser: there is no language server and
// code never leaves the device.  It does not run code (the page does, through the kernel
// supervisor).
import { EditorState, Compartment } from '@codemirror/state';
import { EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection,
  hoverTooltip, placeholder as cmPlaceholder } from '@codemirror/view';
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { syntaxHighlighting, defaultHighlightStyle, bracketMatching, indentOnInput, syntaxTree,
  ensureSyntaxTree, StreamLanguage, foldGutter, indentUnit, LanguageSupport } from '@codemirror/language';
import { autocompletion, completionKeymap, closeBrackets, closeBracketsKeymap, snippetCompletion,
  completeFromList } from '@codemirror/autocomplete';
import { linter, lintGutter, setDiagnostics } from '@codemirror/lint';
import { pythonLanguage, localCompletionSource, globalCompletion } from '@codemirror/lang-python';
import { ruby } from '@codemirror/legacy-modes/mode/ruby';
import { lua } from '@codemirror/legacy-modes/mode/lua';
import { PY_REFERENCE, PY_SNIPPETS } from './pyref.js';

// Ranking: the code's own names (boost 2) above the reference's builtins (1), above Python's other
// keywords and builtins (0), above the snippets (-1): typing "rev" after `revenue_total = …` offers
// revenue_total first, not the builtin reversed.
const refTop = Object.entries(PY_REFERENCE).filter(([k]) => !k.includes('.'))
  .map(([label, [sig, doc]]) => ({ label, type: 'function', detail: sig.replace(/^\w+/, ''), info: doc, boost: 1 }));
const snippets = PY_SNIPPETS.map(([tpl, label, detail]) => snippetCompletion(tpl, { label, detail, type: 'keyword', boost: -1 }));
const topSource = completeFromList([...refTop, ...snippets]);
const refNames = new Set(refTop.map((o) => o.label));

/** The code's own names (lang-python's scope walk), ranked above everything else. */
function localNames(ctx) {
  const r = localCompletionSource(ctx);
  return r && { ...r, options: r.options.map((o) => ({ ...o, boost: 2 })) };
}

/** lang-python's keywords and builtins, without the ones the reference documents (no twins). */
function pyGlobals(ctx) {
  const r = globalCompletion(ctx);
  return r && { ...r, options: r.options.filter((o) => !refNames.has(o.label)) };
}

/** Completes `module.attr` from the reference (json.dumps, plt.show, …). */
function dottedSource(ctx) {
  const m = ctx.matchBefore(/[A-Za-z_][\w]*\.[\w]*$/);
  if (!m) return null;
  const [mod] = m.text.split('.');
  const options = Object.entries(PY_REFERENCE).filter(([k]) => k.startsWith(mod + '.'))
    .map(([k, [sig, doc]]) => ({ label: k.slice(mod.length + 1), type: 'function', detail: sig.slice(sig.indexOf('(')), info: doc }));
  if (!options.length) return null;
  return { from: m.from + mod.length + 1, options, validFor: /^\w*$/ };
}

function pySources(ctx) {
  const tree = syntaxTree(ctx.state);
  const node = tree.resolveInner(ctx.pos, -1);
  if (['String', 'Comment', 'FormatString'].includes(node.name)) return null;
  return dottedSource(ctx) || topSource(ctx);
}

/** Hover: the signature and doc of a documented name under the pointer. */
export const pyHover = hoverTooltip((view, pos, side) => {
  const line = view.state.doc.lineAt(pos);
  const text = line.text;
  let s = pos - line.from, e = s;
  while (s > 0 && /[\w.]/.test(text[s - 1])) s--;
  while (e < text.length && /[\w]/.test(text[e])) e++;
  if (s === e || (s === pos - line.from && side < 0) || (e === pos - line.from && side > 0)) return null;
  const word = text.slice(s, e);
  const key = PY_REFERENCE[word] ? word : PY_REFERENCE[word.split('.').pop()] ? word.split('.').pop() : null;
  if (!key) return null;
  const [sig, doc] = PY_REFERENCE[key];
  return {
    pos: line.from + s, end: line.from + e, above: true,
    create() {
      const dom = document.createElement('div');
      dom.className = 'cm-sig';
      const c = document.createElement('code'); c.textContent = sig;
      const p = document.createElement('div'); p.textContent = doc;
      const n = document.createElement('div'); n.className = 'cm-sig-note'; n.textContent = 'From the editor\u2019s reference: a hint, not proof the runtime has it.';
      dom.append(c, p, n);
      return { dom };
    },
  };
});

/** Syntax diagnostics: every error node of the Lezer parse tree becomes one diagnostic. */
export function syntaxDiagnostics(state) {
  const tree = ensureSyntaxTree(state, state.doc.length, 200) || syntaxTree(state);
  const out = [];
  tree.iterate({
    enter(n) {
      if (!n.type.isError) return;
      let from = n.from, to = n.to;
      if (from === to) { if (to < state.doc.length) to++; else if (from > 0) from--; }
      const near = state.doc.sliceString(from, Math.min(to, from + 20)).trim();
      const line = state.doc.lineAt(from).number;
      if (out.length && out[out.length - 1].from === from) return;
      out.push({ from, to, severity: 'error', source: 'Python syntax',
        message: near ? `Syntax error near \u201c${near}\u201d (line ${line})` : `Syntax error: unexpected end (line ${line})` });
    },
  });
  return out;
}

export const LANGUAGES = {
  python: { label: 'Python', runnable: true },
  ruby: { label: 'Ruby (view only)', runnable: false },
  lua: { label: 'Lua (view only)', runnable: false },
};

// Each language with its conventional indent: PEP 8's four spaces for Python, two for Ruby and Lua.
function languageExtensions(lang) {
  if (lang === 'ruby') return [StreamLanguage.define(ruby), indentUnit.of('  ')];
  if (lang === 'lua') return [StreamLanguage.define(lua), indentUnit.of('  ')];
  return [
    new LanguageSupport(pythonLanguage, [
      pythonLanguage.data.of({ autocomplete: localNames }),
      pythonLanguage.data.of({ autocomplete: pyGlobals }),
      pythonLanguage.data.of({ autocomplete: pySources }),
    ]),
    indentUnit.of('    '),
    pyHover,
    linter((view) => syntaxDiagnostics(view.state), { delay: 300 }),
  ];
}

/**
 * Create an editor in `parent`.
 * @returns {{view: EditorView, getCode: () => string, setCode: (s: string) => void,
 *            setLanguage: (l: string) => void, focus: () => void}}
 */
export function createEditor(parent, { doc = '', language = 'python', onRun, onChange, label = 'Code editor' } = {}) {
  const lang = new Compartment();
  const runKey = keymap.of([{ key: 'Mod-Enter', preventDefault: true, run: () => { onRun?.(); return true; } }]);
  const state = EditorState.create({
    doc,
    extensions: [
      runKey,
      lineNumbers(), highlightActiveLineGutter(), foldGutter(), lintGutter(),
      history(), drawSelection(), indentOnInput(), bracketMatching(), closeBrackets(),
      highlightActiveLine(), syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
      autocompletion({ activateOnTyping: true, icons: true }),
      keymap.of([...closeBracketsKeymap, ...defaultKeymap, ...historyKeymap, ...completionKeymap, indentWithTab]),
      cmPlaceholder('# Python: Ctrl+Enter (\u2318+Enter) runs'),
      EditorView.contentAttributes.of({ 'aria-label': label }),
      EditorView.updateListener.of((u) => { if (u.docChanged) onChange?.(u.state.doc.toString()); }),
      lang.of(languageExtensions(language)),
    ],
  });
  const view = new EditorView({ state, parent });
  return {
    view,
    getCode: () => view.state.doc.toString(),
    setCode: (s) => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: s } }),
    // The lint gutter outlives the language: Python's diagnostics are cleared with the switch.
    setLanguage: (l) => view.dispatch({ effects: [lang.reconfigure(languageExtensions(l)),
      ...[setDiagnostics(view.state, []).effects].flat()] }),
    focus: () => view.focus(),
  };
}
