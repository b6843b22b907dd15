// A chat page on useChat, talking to an io-harness session with no adapter of its own:
// the server's /api/chat speaks the AI SDK's UI message stream. The chat's id is the
// session's, kept in the address, so a reload opens the same conversation; a stream cut
// mid-turn (the server gone) is resumed when the server answers again.
import { Chat, useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';
import htm from 'htm';
import { createElement, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';

const html = htm.bind(createElement);
const params = new URLSearchParams(location.search);
const chatId = params.get('chat') ?? crypto.randomUUID();
if (!params.has('chat')) history.replaceState(null, '', `?chat=${chatId}`);

function Part({ part }) {
  if (part.type === 'text') return html`<p>${part.text}</p>`;
  if (part.type === 'dynamic-tool') {
    const done = part.state === 'output-available' || part.state === 'output-error';
    return html`<div className=${`tool${part.state === 'output-error' ? ' error' : ''}`} data-tool=${part.toolName}>
      ${part.toolName}(${JSON.stringify(part.input ?? {})})${done ? ` → ${part.output ?? part.errorText}` : ' …'}
    </div>`;
  }
  return null;
}

function ChatView({ chat }) {
  const { messages, sendMessage, status, resumeStream } = useChat({ chat, resume: true });
  const [text, setText] = useState('');
  // The server went away mid-turn: ask again for the turn's stream until it answers.
  useEffect(() => {
    if (status !== 'error') return;
    const timer = setInterval(() => resumeStream(), 500);
    return () => clearInterval(timer);
  }, [status, resumeStream]);
  const submit = (event) => {
    event.preventDefault();
    if (text.trim() === '') return;
    sendMessage({ text });
    setText('');
  };
  return html`<div>
    <div id="messages">
      ${messages.map(
        (message) => html`<div key=${message.id} className=${`message ${message.role}`} data-role=${message.role}>
          ${message.parts.map((part, index) => html`<${Part} key=${index} part=${part} />`)}
        </div>`,
      )}
    </div>
    <form onSubmit=${submit}>
      <input id="ask" value=${text} onInput=${(event) => setText(event.target.value)} placeholder="Ask about the garden" />
      <button type="submit" disabled=${status === 'streaming' || status === 'submitted'}>Send</button>
    </form>
    <div id="status" data-status=${status}>${status}</div>
  </div>`;
}

// The conversation so far, from the session. The chat is made here and handed to useChat, so
// its transport is the one given: a resumed stream replays the turn's message from its start
// (resumeStreamIsReplay), which useChat's own wrapper of a `transport` option does not pass on.
const initial = await fetch(`/api/chat/${chatId}/messages`).then((response) => response.json());
const chat = new Chat({ id: chatId, messages: initial, transport: new DefaultChatTransport({ api: '/api/chat' }) });
createRoot(document.getElementById('root')).render(html`<${ChatView} chat=${chat} />`);
