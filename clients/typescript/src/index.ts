// A typed client for Recallatron's public API: the gateway's MemoryService,
// ReviewService and AdminService over HTTP/JSON (the Connect protocol), with
// messages and service descriptors generated from the repository's protos
// (npm run build). Every method of every service is on `memory`, `review`
// and `admin`, typed; `recall` and `remember` are the two calls most agents
// need, with the defaults spelled out.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import {
  type CallOptions,
  type Client,
  type Interceptor,
  type Transport,
  ConnectError,
  Code,
  createClient,
} from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { randomUUID } from "node:crypto";
import { AdminService, MemoryService, ReviewService } from "./gen/recallatron/v1/gateway_pb.js";
import type {
  RecallRequest,
  RecallRequestSchema,
  RecallResponse,
  RememberRequestSchema,
  RememberResponse,
} from "./gen/recallatron/v1/memory_pb.js";

// The services (gateway.proto), and each one's messages (the file named after it).
export * from "./gen/recallatron/v1/admin_pb.js";
export * from "./gen/recallatron/v1/common_pb.js";
export * from "./gen/recallatron/v1/gateway_pb.js";
export * from "./gen/recallatron/v1/memory_pb.js";
export * from "./gen/recallatron/v1/review_pb.js";
export { Code, ConnectError };

/** A recall's fields besides its query, as plain values. */
export type RecallFields = Omit<
  Exclude<MessageInitShape<typeof RecallRequestSchema>, RecallRequest>,
  "query" | "$typeName"
>;

export interface RecallatronOptions {
  /** The gateway's HTTP/JSON address, e.g. "http://127.0.0.1:7420". */
  baseUrl: string;
  /** A member's token (or the operator's, for creating workspaces). */
  token: string;
  /** Each call's deadline, sent as Connect-Timeout-Ms (default: none). */
  timeoutMs?: number;
  /** Binary protobuf instead of JSON on the wire (default: JSON). */
  useBinaryFormat?: boolean;
  /** Another transport (say, the gRPC one); baseUrl is then not used, the
   * token and timeoutMs still apply to every call. */
  transport?: Transport;
}

export interface Recallatron {
  memory: Client<typeof MemoryService>;
  review: Client<typeof ReviewService>;
  admin: Client<typeof AdminService>;
  /** Memories for a query (design §5); other fields of RecallRequest in `more`. */
  recall(
    query: string,
    more?: RecallFields,
    options?: CallOptions,
  ): Promise<RecallResponse>;
  /** A new memory. A request without a request id gets one, written into the
   * request object given: sending that same object again (a retry after a lost
   * answer) replays the first write instead of making a second memory. */
  remember(
    request: MessageInitShape<typeof RememberRequestSchema>,
    options?: CallOptions,
  ): Promise<RememberResponse>;
}

/** Sends the token with every call that does not carry an Authorization
 * header of its own. */
export function bearer(token: string): Interceptor {
  return (next) => async (req) => {
    if (!req.header.has("Authorization")) req.header.set("Authorization", `Bearer ${token}`);
    return await next(req);
  };
}

/** A transport that sends the token with every call it carries (one given
 * in the options may not; a header the caller sets itself still wins), and
 * gives a call without a deadline of its own the client's `timeoutMs`: the
 * client's own transport and one given in the options alike. */
function withToken(inner: Transport, token: string, timeoutMs?: number): Transport {
  const headers = (header: HeadersInit | undefined): Headers => {
    const h = new Headers(header);
    if (!h.has("Authorization")) h.set("Authorization", `Bearer ${token}`);
    return h;
  };
  return {
    unary: (method, signal, callTimeoutMs, header, input, contextValues) =>
      inner.unary(method, signal, callTimeoutMs ?? timeoutMs, headers(header), input, contextValues),
    stream: (method, signal, callTimeoutMs, header, input, contextValues) =>
      inner.stream(method, signal, callTimeoutMs ?? timeoutMs, headers(header), input, contextValues),
  };
}

export function createRecallatron(options: RecallatronOptions): Recallatron {
  const inner = options.transport ?? createConnectTransport({
    baseUrl: options.baseUrl,
    httpVersion: "1.1",
    useBinaryFormat: options.useBinaryFormat ?? false,
  });
  const transport = withToken(inner, options.token, options.timeoutMs);
  const memory = createClient(MemoryService, transport);
  return {
    memory,
    review: createClient(ReviewService, transport),
    admin: createClient(AdminService, transport),
    recall: (query, more, callOptions) => memory.recall({ ...more, query }, callOptions),
    remember: (request, callOptions) => {
      // Kept on the caller's object: a fresh id per call would make each
      // retry a new write.
      if (!request.requestId) request.requestId = randomUUID();
      return memory.remember(request, callOptions);
    },
  };
}

/** The fields a refusal names (google.rpc.BadRequest), e.g. ["limit"]: read
 * from the detail's bytes, which every transport carries (the JSON copy,
 * `debug`, comes only with the Connect protocol's errors, not gRPC's). */
export function fieldViolations(error: unknown): string[] {
  const err = ConnectError.from(error);
  const fields: string[] = [];
  for (const detail of err.details) {
    if (!("type" in detail) || detail.type !== "google.rpc.BadRequest") continue;
    try {
      fields.push(...violatedFields(detail.value));
    } catch {
      // Bytes that are no BadRequest name no field.
    }
  }
  return fields;
}

/** BadRequest's field_violations (1), each FieldViolation's field (1). */
function violatedFields(bytes: Uint8Array): string[] {
  const fields: string[] = [];
  for (const violation of fieldsNumbered(bytes, 1, (r) => r.bytes())) {
    const [field] = fieldsNumbered(violation, 1, (r) => r.string());
    if (field) fields.push(field);
  }
  return fields;
}

/** The length-delimited values of field ``no`` in a message's bytes. */
function fieldsNumbered<T>(bytes: Uint8Array, no: number, read: (r: BinaryReader) => T): T[] {
  const reader = new BinaryReader(bytes);
  const out: T[] = [];
  while (reader.pos < reader.len) {
    const [fieldNo, wireType] = reader.tag();
    if (fieldNo === no && wireType === WireType.LengthDelimited) out.push(read(reader));
    else reader.skip(wireType, fieldNo);
  }
  return out;
}
