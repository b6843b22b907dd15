/**
 * The OpenAI-compatible endpoints people actually use, so nobody types a URL. Each
 * preset names its base URL and the environment variables `Compatible.fromEnv` reads:
 * `<PREFIX>_API_KEY` (not needed by the local runtimes), `<PREFIX>_MODEL`, and
 * `<PREFIX>_BASE_URL` to point it elsewhere.
 */
export interface Preset {
  /** The name `Compatible.preset(name)` takes. */
  name: string;
  /** Who serves it, for people. */
  label: string;
  baseUrl: string;
  /** Environment variable prefix. */
  envPrefix: string;
  /** A local runtime: no key needed. */
  local: boolean;
  /** Whether the endpoint reads `prompt_cache_key`. */
  promptCacheKey: boolean;
}

export const PRESETS: readonly Preset[] = [
  {
    name: 'groq',
    label: 'Groq',
    baseUrl: 'https://api.groq.com/openai/v1',
    envPrefix: 'GROQ',
    local: false,
    promptCacheKey: false,
  },
  { name: 'xai', label: 'xAI', baseUrl: 'https://api.x.ai/v1', envPrefix: 'XAI', local: false, promptCacheKey: false },
  {
    name: 'mistral',
    label: 'Mistral',
    baseUrl: 'https://api.mistral.ai/v1',
    envPrefix: 'MISTRAL',
    local: false,
    promptCacheKey: false,
  },
  {
    name: 'deepseek',
    label: 'DeepSeek',
    baseUrl: 'https://api.deepseek.com/v1',
    envPrefix: 'DEEPSEEK',
    local: false,
    promptCacheKey: false,
  },
  {
    name: 'together',
    label: 'Together',
    baseUrl: 'https://api.together.xyz/v1',
    envPrefix: 'TOGETHER',
    local: false,
    promptCacheKey: false,
  },
  {
    name: 'fireworks',
    label: 'Fireworks',
    baseUrl: 'https://api.fireworks.ai/inference/v1',
    envPrefix: 'FIREWORKS',
    local: false,
    promptCacheKey: false,
  },
  {
    name: 'cerebras',
    label: 'Cerebras',
    baseUrl: 'https://api.cerebras.ai/v1',
    envPrefix: 'CEREBRAS',
    local: false,
    promptCacheKey: false,
  },
  {
    name: 'perplexity',
    label: 'Perplexity',
    baseUrl: 'https://api.perplexity.ai',
    envPrefix: 'PERPLEXITY',
    local: false,
    promptCacheKey: false,
  },
  {
    name: 'gemini',
    label: 'Gemini (OpenAI-compatible endpoint)',
    baseUrl: 'https://generativelanguage.googleapis.com/v1beta/openai',
    envPrefix: 'GEMINI',
    local: false,
    promptCacheKey: false,
  },
  {
    name: 'moonshot',
    label: 'Moonshot',
    baseUrl: 'https://api.moonshot.ai/v1',
    envPrefix: 'MOONSHOT',
    local: false,
    promptCacheKey: false,
  },
  {
    name: 'zhipu',
    label: 'Zhipu',
    baseUrl: 'https://open.bigmodel.cn/api/paas/v4',
    envPrefix: 'ZHIPU',
    local: false,
    promptCacheKey: false,
  },
  {
    name: 'qwen',
    label: 'Qwen (DashScope compatible mode)',
    baseUrl: 'https://dashscope-intl.aliyuncs.com/compatible-mode/v1',
    envPrefix: 'DASHSCOPE',
    local: false,
    promptCacheKey: false,
  },
  {
    name: 'minimax',
    label: 'MiniMax',
    baseUrl: 'https://api.minimax.io/v1',
    envPrefix: 'MINIMAX',
    local: false,
    promptCacheKey: false,
  },
  {
    name: 'ollama',
    label: 'Ollama',
    baseUrl: 'http://localhost:11434/v1',
    envPrefix: 'OLLAMA',
    local: true,
    promptCacheKey: false,
  },
  {
    name: 'llamacpp',
    label: 'llama.cpp server',
    baseUrl: 'http://localhost:8080/v1',
    envPrefix: 'LLAMACPP',
    local: true,
    promptCacheKey: false,
  },
  {
    name: 'vllm',
    label: 'vLLM',
    baseUrl: 'http://localhost:8000/v1',
    envPrefix: 'VLLM',
    local: true,
    promptCacheKey: false,
  },
  {
    name: 'lmstudio',
    label: 'LM Studio',
    baseUrl: 'http://localhost:1234/v1',
    envPrefix: 'LMSTUDIO',
    local: true,
    promptCacheKey: false,
  },
  {
    name: 'localai',
    label: 'LocalAI',
    baseUrl: 'http://localhost:8080/v1',
    envPrefix: 'LOCALAI',
    local: true,
    promptCacheKey: false,
  },
  {
    name: 'jan',
    label: 'Jan',
    baseUrl: 'http://localhost:1337/v1',
    envPrefix: 'JAN',
    local: true,
    promptCacheKey: false,
  },
  {
    name: 'sglang',
    label: 'SGLang',
    baseUrl: 'http://localhost:30000/v1',
    envPrefix: 'SGLANG',
    local: true,
    promptCacheKey: false,
  },
  {
    name: 'koboldcpp',
    label: 'KoboldCpp',
    baseUrl: 'http://localhost:5001/v1',
    envPrefix: 'KOBOLDCPP',
    local: true,
    promptCacheKey: false,
  },
];

export function findPreset(name: string): Preset | undefined {
  return PRESETS.find((preset) => preset.name === name.toLowerCase());
}
