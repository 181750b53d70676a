// The frontends' own clients against the Python server (tests/web/ui_protocol_server.py):
// the Vercel AI SDK's DefaultChatTransport + readUIMessageStream, and @ag-ui/client's HttpAgent.
// SERVER_URL is the server's base URL; FIXTURE (optional) a JSON file of UI message
// chunks to check against the ai package's own chunk schema.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { DefaultChatTransport, readUIMessageStream, uiMessageChunkSchema } from "ai";
import { HttpAgent } from "@ag-ui/client";

const BASE = process.env.SERVER_URL;
const PARTIAL = "Let me think about Lisbon";
const FINAL = "It is 21 °C and sunny in Lisbon today.";
const DEAD_THOUGHT = "Recalling Lisbon.";
const THOUGHT = "The tool says 21 °C.";

const userMessage = (text) => ({ id: "u1", role: "user", parts: [{ type: "text", text }] });
const textOf = (message) =>
  message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");

async function transcripts() {
  const response = await fetch(`${BASE}/transcripts`);
  return response.json();
}

async function waitForTranscripts(count) {
  for (let i = 0; i < 200; i++) {
    const all = await transcripts();
    if (all.length >= count) return all;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the server recorded fewer than ${count} runs`);
}

function everyCallAnswered(transcript) {
  const answered = new Set(transcript.filter((m) => m.role === "tool").map((m) => m.tool_call_id));
  const asked = transcript.flatMap((m) => (m.role === "assistant" ? m.tool_calls ?? [] : []));
  assert.ok(asked.length > 0, "the run asked for no tool call");
  for (const call of asked) assert.ok(answered.has(call.id), `call ${call.id} has no answer`);
  return transcript.filter((m) => m.role === "tool");
}

test("every chunk the server can send passes the ai package's own schema", async (t) => {
  if (!process.env.FIXTURE) return t.skip("no FIXTURE");
  const chunks = JSON.parse(await readFile(process.env.FIXTURE, "utf8"));
  const schema = uiMessageChunkSchema();
  const types = new Set();
  for (const chunk of chunks) {
    const checked = await schema.validate(chunk);
    assert.ok(checked.success, `${JSON.stringify(chunk)}: ${checked.error}`);
    types.add(chunk.type);
  }
  for (const kind of ["reasoning-start", "reasoning-delta", "reasoning-end", "reset-step",
    "tool-input-delta", "tool-output-error", "tool-input-error"]) {
    assert.ok(types.has(kind), `no ${kind} in ${[...types].join(",")}`);
  }
  assert.ok(types.size >= 17, [...types].join(","));
});

test("useChat's transport: the fallback's text alone, never spliced, and the tool part ends done", async () => {
  const transport = new DefaultChatTransport({ api: `${BASE}/api/chat` });
  const stream = await transport.sendMessages({
    chatId: "chat-1",
    messages: [userMessage("Weather in Lisbon?")],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });
  const snapshots = [];
  for await (const message of readUIMessageStream({ stream })) {
    snapshots.push(structuredClone(message));
  }
  const last = snapshots.at(-1);
  assert.equal(textOf(last), FINAL);
  assert.ok(
    snapshots.some((m) => textOf(m).startsWith(PARTIAL)),
    "the dead attempt's text was never shown (the test shows nothing)",
  );
  for (const m of snapshots) {
    const text = textOf(m);
    assert.ok(!(text.includes(PARTIAL) && text.includes("21 °C")), `spliced: ${text}`);
  }
  const thoughts = (m) => m.parts.filter((p) => p.type === "reasoning").map((p) => p.text);
  assert.ok(snapshots.some((m) => thoughts(m).includes(DEAD_THOUGHT)), "the dead attempt's thinking was never shown");
  assert.deepEqual(thoughts(last), [THOUGHT], "the withdrawn thinking stayed, or the final one is missing");
  assert.ok(last.parts.filter((p) => p.type === "reasoning").every((p) => p.state === "done"));
  const tools = last.parts.filter((p) => p.type === "tool-weather");
  assert.equal(tools.length, 1);
  assert.equal(tools[0].state, "output-available");
  assert.deepEqual(tools[0].input, { city: "Lisbon" });
  assert.ok(
    snapshots.some((m) => m.parts.some((p) => p.type === "tool-weather" && p.state === "input-streaming")),
    "the arguments never streamed",
  );
});

test("useChat's stop(): the abort cancels the run and the server's transcript answers every call", async () => {
  const before = (await transcripts()).length;
  const transport = new DefaultChatTransport({ api: `${BASE}/api/chat` });
  const abort = new AbortController();
  const stream = await transport.sendMessages({
    chatId: "chat-2",
    messages: [userMessage("Weather in Slowtown?")],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: abort.signal,
  });
  let state;
  try {
    for await (const message of readUIMessageStream({ stream })) {
      const part = message.parts.find((p) => p.type === "tool-weather");
      if (part && part.state === "input-available") {
        state = part.state;
        abort.abort();
      }
    }
  } catch (error) {
    assert.equal(error.name, "AbortError");
  }
  assert.equal(state, "input-available");
  const all = await waitForTranscripts(before + 1);
  const answers = everyCallAnswered(all.at(-1));
  assert.match(answers[0].content, /interrupted|not_run/);
});

test("AG-UI HttpAgent: the client's messages end as the run's, the dead attempt withdrawn", async () => {
  const agent = new HttpAgent({
    url: `${BASE}/agui`,
    threadId: "thread-1",
    initialMessages: [{ id: "u1", role: "user", content: "Weather in Lisbon?" }],
  });
  const seen = [];
  const kinds = [];
  await agent.runAgent(
    { runId: "run-1" },
    {
      onMessagesChanged: ({ messages }) => {
        seen.push(structuredClone(messages));
      },
      onEvent: ({ event }) => {
        kinds.push(event.type);
      },
    },
  );
  const assistants = agent.messages.filter((m) => m.role === "assistant");
  assert.equal(assistants.at(-1).content, FINAL);
  for (const m of agent.messages) assert.ok(!String(m.content ?? "").includes(PARTIAL));
  assert.ok(seen.some((ms) => ms.some((m) => String(m.content ?? "").startsWith(PARTIAL))));
  for (const ms of seen) {
    const text = ms.map((m) => String(m.content ?? "")).join("|");
    assert.ok(!(text.includes(PARTIAL) && text.includes("21 °C")), `spliced: ${text}`);
  }
  const thoughts = agent.messages.filter((m) => m.role === "reasoning").map((m) => m.content);
  assert.ok(seen.some((ms) => ms.some((m) => m.role === "reasoning" && m.content === DEAD_THOUGHT)));
  assert.ok(!thoughts.includes(DEAD_THOUGHT), `the withdrawn thinking stayed: ${thoughts}`);
  assert.ok(thoughts.includes(THOUGHT), `no final thinking: ${thoughts}`);
  const calls = assistants.flatMap((m) => m.toolCalls ?? []);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].function.name, "weather");
  assert.deepEqual(JSON.parse(calls[0].function.arguments), { city: "Lisbon" });
  const result = agent.messages.find((m) => m.role === "tool");
  assert.equal(result.toolCallId, calls[0].id);
  for (const kind of ["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END", "MESSAGES_SNAPSHOT", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
    "TOOL_CALL_RESULT", "STEP_FINISHED", "RUN_FINISHED", "REASONING_START",
    "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END"]) {
    assert.ok(kinds.includes(kind), `no ${kind} in ${kinds.join(",")}`);
  }
});

test("AG-UI abortRun(): the run is cancelled and the server's transcript answers every call", async () => {
  const before = (await transcripts()).length;
  const agent = new HttpAgent({
    url: `${BASE}/agui`,
    threadId: "thread-2",
    initialMessages: [{ id: "u1", role: "user", content: "Weather in Slowtown?" }],
  });
  const running = agent.runAgent(
    { runId: "run-2" },
    {
      onToolCallEndEvent: () => {
        setTimeout(() => agent.abortRun(), 0);
      },
    },
  );
  await running.catch(() => undefined);
  const all = await waitForTranscripts(before + 1);
  const answers = everyCallAnswered(all.at(-1));
  assert.match(answers[0].content, /interrupted|not_run/);
});

test("AG-UI client-defined tools: the run ends with the call for the client, whose answer goes on", async () => {
  const pickDate = {
    name: "pick_date",
    description: "Ask the user for a date",
    parameters: { type: "object", properties: { month: { type: "string" } } },
  };
  const agent = new HttpAgent({
    url: `${BASE}/agui`,
    threadId: "thread-3",
    initialMessages: [{ id: "u1", role: "user", content: "Book me a day in May." }],
  });
  const kinds = [];
  await agent.runAgent(
    { runId: "run-3", tools: [pickDate] },
    { onEvent: ({ event }) => { kinds.push(event.type); } },
  );
  assert.equal(kinds.at(-1), "RUN_FINISHED");
  assert.ok(!kinds.includes("TOOL_CALL_RESULT"), `the server answered the client's call: ${kinds}`);
  const calls = agent.messages.flatMap((m) => (m.role === "assistant" ? m.toolCalls ?? [] : []));
  assert.equal(calls.length, 1);
  assert.equal(calls[0].function.name, "pick_date");
  assert.deepEqual(JSON.parse(calls[0].function.arguments), { month: "May" });
  assert.ok(!agent.messages.some((m) => m.role === "tool"), "a tool message before the client ran it");
  // The client runs its tool and sends the answer; the run goes on from it.
  agent.addMessage({ id: "t1", role: "tool", toolCallId: calls[0].id, content: "May 3" });
  await agent.runAgent({ runId: "run-4", tools: [pickDate] });
  const last = agent.messages.at(-1);
  assert.equal(last.role, "assistant");
  assert.equal(last.content, "You picked May 3.");
  const all = await transcripts();
  const second = all.at(-1);
  assert.deepEqual(second.filter((m) => m.role === "tool").map((m) => m.content), ["May 3"]);
});
