// Types of browser-pilot-client.mjs (copy both files). JSON shapes the Broker defines are kept
// open (`Json`): docs/protocol.md and each tool's schemas in `tools/list` are authoritative, and
// unknown fields must be ignored.

export type Json = { [key: string]: any };

export declare const PROTOCOL: {
  min: { major: number; minor: number };
  max: { major: number; minor: number };
};
export declare const CAPABILITIES: readonly string[];
export declare const LIMITS: { maxMessageBytes: number; maxResultBytes: number };

export interface Remediation {
  action: string;
  message: string;
  url?: string;
}

/** A structured error. Branch on `code` (the stable `data.code`), never on the message. */
export declare class BrokerError extends Error {
  constructor(code: string, message: string, details?: {
    retryable?: boolean; remediation?: Remediation; context?: Json });
  readonly code: string;
  readonly retryable: boolean;
  readonly remediation?: Remediation;
  readonly context: Json;
  static fromRpc(error: Json): BrokerError;
}

/** A mutation that may or may not have reached the browser. Never retried: observe first. */
export declare class UnknownOutcome extends BrokerError {
  constructor(message: string, details?: { remediation?: Remediation; context?: Json });
  readonly code: "unknown_outcome";
  readonly retryable: false;
}

export interface BridgeOptions {
  /** An absolute, product-owned BROWSER_PILOT_HOME (deliberate isolation). */
  home?: string;
  /** The bridge's environment (default: this process's). */
  env?: Record<string, string | undefined>;
  /** `events/event` notifications: a low-latency hint; pollEvents is the record. */
  onEvent?: (event: Json) => void;
  /** One stderr line of the bridge: a diagnostic, never protocol. */
  onDiagnostic?: (line: string) => void;
}

/** One `browser-pilot bridge --stdio` child: whole request lines in, responses by id. */
export declare class Bridge {
  static launch(executable: string, args: string[], options?: BridgeOptions): Promise<Bridge>;
  maxMessageBytes: number;
  readonly pid: number;
  readonly isClosed: boolean;
  /** Resolves when the bridge's stdout ended (it exited, or the Broker behind it did). */
  readonly closed: Promise<void>;
  request(method: string, params: Json, mutating?: boolean): Promise<Json>;
  close(): Promise<void>;
}

export interface ClientOptions extends BridgeOptions {
  /** Absolute path of the browser-pilot you pin. */
  executable: string;
  /** Your product, e.g. "com.example.agent". */
  clientId: string;
  /** This installation, the same after a restart (the Principal is clientId + instanceId). */
  instanceId: string;
  /** The Workspace's clientKey: one per host task or conversation. */
  workScope: string;
  clientName?: string;
  clientVersion?: string;
  /** Default: CAPABILITIES (the contract's six). */
  capabilities?: readonly string[];
  /** The bridge's --browser preference. */
  browser?: string;
  /** Default 30000 (1000..300000). */
  leaseTtlMs?: number;
  /** Default true: a timer heartbeats the Lease at a third of its TTL. */
  heartbeats?: boolean;
}

export interface Outcome {
  /** The Command: id, status, method, mutating, ... */
  command: Json;
  /** The tool's result (its outputSchema). */
  result: Json;
}

export interface EventBatch {
  events: Json[];
  /** Acknowledge it once every event is processed. */
  nextCursor: string;
  hasMore: boolean;
}

export interface Recovery {
  /** The Broker restarted: tabs, Observations and events start afresh. */
  workspaceLost: boolean;
  previousWorkspaceId: string;
  workspaceId: string;
  eventCursor: string;
}

/** One host work scope over one bridge: a Workspace and its heartbeated Lease. */
export declare class Client {
  static start(options: ClientOptions): Promise<Client>;
  readonly options: ClientOptions;
  /** The last fully processed cursor, in memory only. */
  eventCursor: string;
  /** The tab last opened or addressed: the default of target tools. */
  targetId: string | null;
  readonly workspaceId: string;
  readonly leaseId: string;
  /** `tools/list` by name: scope, mutating, schemas, sensitivity. */
  readonly tools: Record<string, Json>;
  readonly initialized: Json;
  /** The current bridge process (a new one after recover()). */
  readonly bridge: Bridge;
  readonly connected: boolean;
  /** Why the Lease can no longer be used (expired, bridge gone), or null. */
  readonly leaseLost: BrokerError | null;
  waitDisconnected(): Promise<void>;
  heartbeat(): Promise<Json>;
  request(method: string, params: Json): Promise<Json>;
  /** `[commandId, idempotencyKey]` of a host tool call. */
  commandIdentity(toolCallId: string): [string, string];
  call(toolCallId: string, name: string, args?: Json,
    options?: { targetId?: string; deadlineMs?: number }): Promise<Outcome>;
  pollEvents(limit?: number): Promise<EventBatch>;
  acknowledgeEvents(nextCursor: string): void;
  resetEventCursor(): Promise<string>;
  releaseArtifact(descriptor: Json): Promise<void>;
  readImage(descriptor: Json): Promise<Buffer>;
  exportFile(descriptor: Json, directory: string): Promise<string>;
  recover(): Promise<Recovery>;
  close(options?: { releaseWorkspace?: boolean }): Promise<BrokerError | null>;
}
