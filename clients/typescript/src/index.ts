// A typed client for Recallatron's public API: the gateway's MemoryService,
// ReviewService and AdminService over HTTP/JSON (the Connect protocol), with
// messages and service descriptors generated from the repository's protos
// (npm run build). Every method of every service is on `memory`, `review`
// and `admin`, typed; `recall` and `remember` are the two calls most agents
// need, with the defaults spelled out.

import { type MessageInitShape, ScalarType, create } from "@bufbuild/protobuf";
import { type ReflectMessage, isReflectList, isReflectMessage, reflect } from "@bufbuild/protobuf/reflect";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
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
  /** The gateway's HTTP/JSON address, e.g. "http://127.0.0.1:7420";
   * required unless `transport` is given. */
  baseUrl?: string;
  /** A member's token (or the operator's, for creating workspaces). */
  token: string;
  /** Each call's deadline in whole milliseconds, sent as Connect-Timeout-Ms
   * (default and 0: none). */
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
 * in the options may not; a header the caller sets itself still wins),
 * gives a call without a deadline of its own the client's `timeoutMs`, and
 * refuses a request whose integers the wire cannot carry: the client's own
 * transport and one given in the options alike. */
function withToken(inner: Transport, token: string, timeoutMs?: number): Transport {
  const headers = (header: HeadersInit | undefined): Headers => {
    const h = new Headers(header);
    if (!h.has("Authorization")) h.set("Authorization", `Bearer ${token}`);
    return h;
  };
  return {
    unary: (method, signal, callTimeoutMs, header, input, contextValues) => {
      const message = create(method.input, input);
      checkIntegers(reflect(method.input, message));
      return inner.unary(method, signal, callTimeoutMs ?? timeoutMs, headers(header), message, contextValues);
    },
    // The services have no streaming calls; a stream's messages go unchecked.
    stream: (method, signal, callTimeoutMs, header, input, contextValues) =>
      inner.stream(method, signal, callTimeoutMs ?? timeoutMs, headers(header), input, contextValues),
  };
}

/** An InvalidArgument naming `field` as the gateway's refusals do (a
 * google.rpc.BadRequest detail, "field: why" as the message), so a caller
 * handles the client's refusals and the server's alike. */
function refusal(field: string, why: string): ConnectError {
  const violation = new BinaryWriter().tag(1, WireType.LengthDelimited).string(field)
    .tag(2, WireType.LengthDelimited).string(why).finish();
  const detail = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(violation).finish();
  const error = new ConnectError(`${field}: ${why}`, Code.InvalidArgument);
  // As a detail read from the wire is, which fieldViolations decodes.
  error.details.push({ type: "google.rpc.BadRequest", value: detail });
  return error;
}

const INT_RANGES = new Map<ScalarType, [number, number]>([
  [ScalarType.INT32, [-(2 ** 31), 2 ** 31 - 1]],
  [ScalarType.SINT32, [-(2 ** 31), 2 ** 31 - 1]],
  [ScalarType.SFIXED32, [-(2 ** 31), 2 ** 31 - 1]],
  [ScalarType.UINT32, [0, 2 ** 32 - 1]],
  [ScalarType.FIXED32, [0, 2 ** 32 - 1]],
  [ScalarType.INT64, [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]],
  [ScalarType.SINT64, [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]],
  [ScalarType.SFIXED64, [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]],
  [ScalarType.UINT64, [0, Number.MAX_SAFE_INTEGER]],
  [ScalarType.FIXED64, [0, Number.MAX_SAFE_INTEGER]],
]);

/** Refuses an integer field holding NaN, an infinity, a fraction or a number
 * past its type: JSON would send NaN and the infinities as null (the field's
 * default, silently) and binary fails with no field named. Fields are named
 * by their proto path, as the server names them ("limit", "settings.rerank_depth"). */
function checkIntegers(message: ReflectMessage, prefix = ""): void {
  for (const field of message.fields) {
    if (!message.isSet(field)) continue;
    const name = prefix + field.name;
    const value: unknown = message.get(field);
    const values = isReflectList(value) ? [...value] : [value];
    for (const item of values) {
      if (isReflectMessage(item)) checkIntegers(item, `${name}.`);
      const range = field.scalar === undefined ? undefined : INT_RANGES.get(field.scalar);
      if (range && typeof item === "number" && !(Number.isInteger(item) && item >= range[0] && item <= range[1])) {
        throw refusal(name, `must be a whole number in [${range[0]}, ${range[1]}], not ${item}`);
      }
    }
  }
}

/** The client's deadline: 0 and none mean none of the client's own (as
 * Connect's transports read 0; said here for any transport, whose own
 * default then applies). */
function deadline(timeoutMs: number | undefined): number | undefined {
  if (timeoutMs === undefined || timeoutMs === 0) return undefined;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 0) {
    throw refusal("timeoutMs", `must be a whole number of milliseconds, 0 (no deadline) or more, not ${timeoutMs}`);
  }
  return timeoutMs;
}

export function createRecallatron(options: RecallatronOptions): Recallatron {
  if (!options.transport && !options.baseUrl) {
    throw refusal("baseUrl", "the gateway's address is required when no transport is given");
  }
  const inner = options.transport ?? createConnectTransport({
    baseUrl: options.baseUrl ?? "",
    httpVersion: "1.1",
    useBinaryFormat: options.useBinaryFormat ?? false,
  });
  const transport = withToken(inner, options.token, deadline(options.timeoutMs));
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
