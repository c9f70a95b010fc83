// A model split over two workers (serve --stages 2) generates exactly what
// `bonfire generate` gives in one process, through /api/v3/generate
// (streamed and not, greedy and seeded sampling, tokens and text prompts)
// and through the official OpenAI client (chat and completions, streamed and
// not, models.list), and the chat endpoint's prompt is the chat template's
// rendering tokenized without special tokens.
import fs from 'node:fs';
import path from 'node:path';
import {
  check, checkEqual, checkStream, loadOpenAI, log, main, postJson, runBonfire, runBonfireJson, startServe,
  startWorker, streamGenerate, tempDir, testModel, tinyChatModel, waitWorkers,
} from './harness.mjs';

const chatModel = () => tinyChatModel(tempDir());

// `bonfire generate --json` in one process: the reference.
function reference(model, { tokens, prompt, maxTokens, temperature = 0, seed = 0, topK = 0, topP = 1 }) {
  const args = ['generate', '--model', model, '--max-tokens', String(maxTokens), '--temperature', String(temperature),
                '--seed', String(seed), '--top-k', String(topK), '--top-p', String(topP), '--json'];
  if (tokens) args.push('--tokens', tokens.join(','));
  else args.push('--prompt', prompt);
  return runBonfireJson(args);
}

function sameGeneration(got, want, what) {
  for (const k of ['tokens', 'text', 'finishReason', 'promptTokens']) checkEqual(got[k], want[k], `${what}: ${k}`);
}

await main('pipeline', async () => {
  const model = chatModel();
  const nLayers = JSON.parse(fs.readFileSync(path.join(model, 'config.json'), 'utf8')).num_hidden_layers;
  const serve = await startServe(['--no-local-worker', '--model', model, '--stages', '2']);
  for (const id of ['a', 'b']) startWorker(serve.url, ['--model', model, '--id', id, '--no-fetch']);
  await waitWorkers(serve, 2, { ids: ['a', 'b'], model: 'tinychat' });
  log(`serve at ${serve.url} with workers a and b`);

  const prompt = [320, 72, 101, 108, 108, 111, 44, 301, 108, 100];
  const cases = [
    { name: 'greedy, tokens', tokens: prompt, maxTokens: 24 },
    { name: 'sampled, tokens', tokens: prompt, maxTokens: 24, temperature: 0.8, seed: 7 },
    { name: 'sampled top-k/top-p, tokens', tokens: prompt.slice(1), maxTokens: 20, temperature: 1.1, seed: 12345,
      topK: 40, topP: 0.9 },
    { name: 'greedy, text prompt', prompt: 'Hello, world', maxTokens: 16 },
    { name: 'sampled, text prompt', prompt: 'The fire burns', maxTokens: 16, temperature: 0.7, seed: 3 },
  ];
  for (const c of cases) {
    const want = reference(model, c);
    check(want.tokens.length > 0, `${c.name}: the reference generated nothing`);
    const body = { model: 'tinychat', maxTokens: c.maxTokens, temperature: c.temperature ?? 0, seed: c.seed ?? 0,
                   topK: c.topK ?? 0, topP: c.topP ?? 1, ...(c.tokens ? { tokens: c.tokens } : { prompt: c.prompt }) };
    const r = await postJson(serve.url, '/api/v3/generate', body);
    check(r.status === 200, `${c.name}: HTTP ${r.status}: ${r.text}`);
    sameGeneration(r.json, want, `${c.name}, not streamed`);
    // The placement: two stages on two distinct workers, covering every layer in order.
    const stages = r.json.workers.map((s) => /^(\w+):(\d+)-(\d+)$/.exec(s));
    check(stages.length === 2 && stages.every(Boolean), `${c.name}: "workers" is not two stages: ${r.json.workers}`);
    check(stages[0][1] !== stages[1][1], `${c.name}: both stages on one worker: ${r.json.workers}`);
    checkEqual(stages.map((s) => s[1]).sort(), ['a', 'b'], `${c.name}: the stages' workers`);
    checkEqual(stages.map((s) => [Number(s[2]), Number(s[3])]), [[0, stages[0][3] | 0], [stages[0][3] | 0, nLayers]],
               `${c.name}: the stages' layer ranges`);
    check(Number(stages[0][3]) > 0 && Number(stages[0][3]) < nLayers, `${c.name}: an empty stage: ${r.json.workers}`);
    check(r.json.failovers === 0, `${c.name}: failovers ${r.json.failovers} in an undisturbed run`);

    const events = await streamGenerate(serve.url, body);
    const done = checkStream(events, `${c.name}, streamed`);
    sameGeneration(done, want, `${c.name}, streamed`);
    // Placement follows the workers' measured speeds (docs/NETWORK.md), so
    // the two runs may order a and b differently; both cover the layers.
    checkEqual([...done.workers.map((s) => s.split(':')[0])].sort(), ['a', 'b'], `${c.name}: streamed run's workers`);
    log(`${c.name}: ${want.tokens.length} tokens equal to bonfire generate (${JSON.stringify(want.text)})`);
  }

  // ---- the OpenAI client ----
  const OpenAI = await loadOpenAI();
  const client = new OpenAI({ baseURL: `${serve.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 120000 });
  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  checkEqual(models, ['tinychat'], 'models.list() ids');

  const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hi, fire!' }];
  const msgFile = path.join(tempDir(), 'messages.json');
  fs.writeFileSync(msgFile, JSON.stringify(messages));
  const rendered = runBonfire(['template', '--model', model, '--messages', msgFile, '--generation-prompt']);
  check(rendered.code === 0, `bonfire template failed: ${rendered.stderr}`);
  check(rendered.stdout.startsWith('<|begin_of_text|>system: You are terse.'),
        `the template rendered ${JSON.stringify(rendered.stdout)}`);
  // openai() in server_generate.cpp: chat prompts are tokenized without the
  // post-processor's special tokens (the template wrote the BOS itself).
  const chatTokens = runBonfireJson(['tokenize', '--model', model, '--text', rendered.stdout, '--no-special']);
  check(chatTokens[0] === 320 && chatTokens.filter((t) => t === 320).length === 1,
        `the rendered chat prompt should hold one BOS, first: ${chatTokens}`);

  for (const sampling of [{ temperature: 0 }, { temperature: 0.8, seed: 99 }]) {
    const what = `chat ${JSON.stringify(sampling)}`;
    const viaTokens = await postJson(serve.url, '/api/v3/generate',
                                     { tokens: chatTokens, maxTokens: 20, seed: 0, ...sampling });
    check(viaTokens.status === 200, `${what}: generate HTTP ${viaTokens.status}: ${viaTokens.text}`);
    const want = reference(model, { tokens: chatTokens, maxTokens: 20, ...sampling });
    sameGeneration(viaTokens.json, want, `${what}: /api/v3/generate with the template's tokens`);

    const plain = await client.chat.completions.create({ model: 'tinychat', messages, max_tokens: 20, ...sampling });
    const content = plain.choices[0].message.content;
    checkEqual(content, want.text, `${what}: chat completion content and the template's generation`);
    checkEqual(plain.usage.prompt_tokens, chatTokens.length, `${what}: usage.prompt_tokens`);
    checkEqual(plain.usage.completion_tokens, want.tokens.length, `${what}: usage.completion_tokens`);
    checkEqual(plain.choices[0].finish_reason, want.finishReason === 'length' ? 'length' : 'stop',
               `${what}: finish_reason`);

    const stream = await client.chat.completions.create({ model: 'tinychat', messages, max_tokens: 20, stream: true,
                                                          stream_options: { include_usage: true }, ...sampling });
    let streamed = '', finish = null, usage = null, chunks = 0;
    for await (const chunk of stream) {
      ++chunks;
      if (chunk.usage) usage = chunk.usage;
      const ch = chunk.choices[0];
      if (!ch) continue;
      streamed += ch.delta?.content ?? '';
      if (ch.finish_reason) finish = ch.finish_reason;
    }
    check(chunks > 2, `${what}: only ${chunks} streamed chunks`);
    checkEqual(streamed, content, `${what}: streamed chat content and the non-streamed content`);
    checkEqual(finish, plain.choices[0].finish_reason, `${what}: streamed finish_reason`);
    checkEqual(usage?.completion_tokens, want.tokens.length, `${what}: streamed usage.completion_tokens`);
    log(`${what}: ${JSON.stringify(content)} equal streamed, not streamed and via tokens`);
  }

  // Completions tokenize with the special tokens, as /api/v3/generate's prompt does.
  for (const sampling of [{ temperature: 0 }, { temperature: 0.9, seed: 5 }]) {
    const what = `completions ${JSON.stringify(sampling)}`;
    const want = reference(model, { prompt: 'Once upon a fire', maxTokens: 18, ...sampling });
    const plain = await client.completions.create({ model: 'tinychat', prompt: 'Once upon a fire', max_tokens: 18,
                                                    ...sampling });
    checkEqual(plain.choices[0].text, want.text, `${what}: completion text and bonfire generate --prompt`);
    checkEqual(plain.usage.prompt_tokens, want.promptTokens, `${what}: usage.prompt_tokens`);
    const stream = await client.completions.create({ model: 'tinychat', prompt: 'Once upon a fire', max_tokens: 18,
                                                     stream: true, ...sampling });
    let streamed = '';
    for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? '';
    checkEqual(streamed, want.text, `${what}: streamed completion text`);
    log(`${what}: ${JSON.stringify(want.text)} equal streamed and not`);
  }
});
