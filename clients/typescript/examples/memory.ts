// The client at work: remember a memory, or recall, printing the answer as
// proto3 JSON (the same JSON the HTTP/JSON API answers with).
//
//   RECALLATRON_URL=http://127.0.0.1:7420 RECALLATRON_TOKEN=... \
//     node dist/examples/memory.js remember "The standup moved to 9:30" "From Monday ..."
//   node dist/examples/memory.js recall "when is the standup" [limit]
//
// RECALLATRON_GRPC=host:port calls the gateway's gRPC port instead (the
// client over a transport of the caller's own).
//
// A refusal prints {"error": {"code", "message", "fields"}} and exits 1.

import { toJson } from "@bufbuild/protobuf";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  ConnectError,
  Code,
  Kind,
  RecallResponseSchema,
  RememberResponseSchema,
  createRecallatron,
  fieldViolations,
} from "../src/index.js";

async function main(args: string[]): Promise<unknown> {
  const baseUrl = process.env.RECALLATRON_URL ?? "http://127.0.0.1:7420";
  // RECALLATRON_OWN_TRANSPORT=1: a transport of the caller's own making,
  // which the client still sends the token through.
  const grpc = process.env.RECALLATRON_GRPC;
  const transport = grpc
    ? createGrpcTransport({ baseUrl: `http://${grpc}` })
    : process.env.RECALLATRON_OWN_TRANSPORT
      ? createConnectTransport({ baseUrl, httpVersion: "1.1" })
      : undefined;
  const client = createRecallatron({
    token: process.env.RECALLATRON_TOKEN ?? "",
    // RECALLATRON_TIMEOUT_MS: each call's deadline (default 30 s; 0: none).
    timeoutMs: Number(process.env.RECALLATRON_TIMEOUT_MS ?? 30_000),
    // A transport of the caller's own needs no baseUrl.
    ...(transport ? { transport } : { baseUrl }),
  });
  const [command, ...rest] = args;
  if (command === "remember") {
    const [title, body = ""] = rest;
    const request = {
      title,
      body,
      kind: Kind.FACT,
      audience: { scope: { case: "workspace" as const, value: true } },
    };
    let made = await client.remember(request);
    // RECALLATRON_RETRY=1: the same request sent again, as a caller whose
    // answer was lost would: it replays the first write (one memory).
    if (process.env.RECALLATRON_RETRY) made = await client.remember(request);
    return toJson(RememberResponseSchema, made);
  }
  if (command === "recall") {
    const [query, limit = "0"] = rest;
    // RECALLATRON_CALL_TOKEN: this call's own Authorization header, which
    // wins over the client's token.
    const callToken = process.env.RECALLATRON_CALL_TOKEN;
    const options = callToken ? { headers: { Authorization: `Bearer ${callToken}` } } : {};
    const found = await client.recall(query, { limit: Number(limit) }, options);
    return toJson(RecallResponseSchema, found);
  }
  throw new Error("usage: memory.js remember TITLE [BODY] | recall QUERY [LIMIT]");
}

try {
  console.log(JSON.stringify(await main(process.argv.slice(2))));
} catch (error) {
  const err = ConnectError.from(error);
  const refusal = { code: Code[err.code], message: err.rawMessage, fields: fieldViolations(err) };
  console.log(JSON.stringify({ error: refusal }));
  process.exitCode = 1;
}
