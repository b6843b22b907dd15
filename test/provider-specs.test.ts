import { afterEach, describe, expect, it } from 'vitest';
import { Anthropic, Compatible, HarnessError, OpenAI, OpenRouter, PRESETS, withFallback } from '../dist/index.js';
import { redactSpec } from '../dist/runtime/provider.js';

const saved = { ...process.env };
afterEach(() => {
  process.env = { ...saved };
});

function failure(build: () => unknown): HarnessError {
  try {
    build();
  } catch (error) {
    if (HarnessError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('no error');
}

describe('provider specs', () => {
  it('has the 21 presets, each with a base URL and documented variables', () => {
    expect(PRESETS.map((preset) => preset.name)).toEqual([
      'groq',
      'xai',
      'mistral',
      'deepseek',
      'together',
      'fireworks',
      'cerebras',
      'perplexity',
      'gemini',
      'moonshot',
      'zhipu',
      'qwen',
      'minimax',
      'ollama',
      'llamacpp',
      'vllm',
      'lmstudio',
      'localai',
      'jan',
      'sglang',
      'koboldcpp',
    ]);
    for (const preset of PRESETS) expect(() => new URL(preset.baseUrl)).not.toThrow();
    expect(PRESETS.filter((preset) => preset.local)).toHaveLength(8);
  });

  it('reads each vendor from its documented variables, naming the key variable and never copying the key', () => {
    process.env.OPENAI_API_KEY = 'sk-secret';
    process.env.OPENAI_MODEL = 'gpt-test';
    expect(OpenAI.fromEnv()).toEqual({ kind: 'openai', model: 'gpt-test', apiKeyEnv: 'OPENAI_API_KEY' });
    process.env.ANTHROPIC_API_KEY = 'k';
    expect(Anthropic.fromEnv({ model: 'claude-test' })).toMatchObject({ kind: 'anthropic', model: 'claude-test' });
    process.env.OPENROUTER_API_KEY = 'k';
    process.env.OPENROUTER_MODEL = 'vendor/model';
    process.env.OPENROUTER_BASE_URL = 'http://127.0.0.1:9/api/v1/';
    expect(OpenRouter.fromEnv()).toMatchObject({ kind: 'openrouter', baseUrl: 'http://127.0.0.1:9/api/v1' });
    process.env.GROQ_API_KEY = 'k';
    process.env.GROQ_MODEL = 'llama';
    expect(Compatible.fromEnv('groq')).toEqual({
      kind: 'compatible',
      preset: 'groq',
      baseUrl: 'https://api.groq.com/openai/v1',
      model: 'llama',
      auth: 'bearer',
      apiKeyEnv: 'GROQ_API_KEY',
    });
    process.env.OLLAMA_MODEL = 'qwen3';
    expect(Compatible.fromEnv('ollama')).toMatchObject({
      preset: 'ollama',
      auth: 'none',
      baseUrl: 'http://localhost:11434/v1',
    });
    expect(JSON.stringify(OpenAI.fromEnv())).not.toContain('sk-secret');
  });

  it('says what is missing and how to set it', () => {
    delete process.env.OPENAI_API_KEY;
    let error = failure(() => OpenAI.fromEnv({ model: 'm' }));
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(error.message).toContain('OPENAI_API_KEY is not set');
    process.env.MISTRAL_API_KEY = 'k';
    delete process.env.MISTRAL_MODEL;
    error = failure(() => Compatible.fromEnv('mistral'));
    expect(error.message).toContain('set MISTRAL_MODEL or pass { model }');
    error = failure(() => Compatible.preset('grok-but-misspelt', { model: 'x' }));
    expect(error.message).toContain('there is no preset "grok-but-misspelt"');
    expect(error.message).toContain('groq, xai, mistral');
    error = failure(() => Compatible.create({ baseUrl: 'not a url', model: 'm' }));
    expect(error.message).toContain('"not a url" is not a URL');
    error = failure(() => OpenAI.create({ model: 'm', baseUrl: 'ftp://example.com' }));
    expect(error.message).toContain('is not an http(s) URL');
    error = failure(() => withFallback([]));
    expect(error.message).toContain('at least one provider');
  });

  it('keeps keys out of what is stored', () => {
    const spec = withFallback([
      OpenAI.create({ model: 'm', apiKey: 'sk-1' }),
      Anthropic.create({ model: 'c', apiKey: 'sk-2' }),
    ]);
    const stored = JSON.stringify(redactSpec(spec));
    expect(stored).not.toContain('sk-1');
    expect(stored).not.toContain('sk-2');
    expect(stored).toContain('"model":"m"');
  });
});
