// A hosted-style MCP client in TypeScript's SDK (the one the MCP Inspector
// ships and runs its own OAuth flow with), given nothing but the server's URL:
// the 401, the protected-resource and authorization-server metadata, dynamic
// registration, the authorization-code grant with PKCE (the person's browser
// stands in as one fetch that reads the code off the redirect), then the
// tools. Run by tests/surfaces/test_mcp_oauth.py with NODE_PATH at .tools'
// node_modules; prints one JSON line.
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { UnauthorizedError } = require("@modelcontextprotocol/sdk/client/auth.js");

class Provider {
  constructor() {
    this.visited = [];
    this.code = undefined;
    this._tokens = undefined;
    this._client = undefined;
    this._verifier = undefined;
  }
  get redirectUrl() {
    return "http://127.0.0.1:1/callback";
  }
  get clientMetadata() {
    return {
      client_name: "typescript sdk test client",
      redirect_uris: [this.redirectUrl],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this._client;
  }
  saveClientInformation(info) {
    this._client = info;
  }
  tokens() {
    return this._tokens;
  }
  saveTokens(tokens) {
    this._tokens = tokens;
  }
  async redirectToAuthorization(url) {
    this.visited.push(url.toString());
    const answer = await fetch(url, { redirect: "manual" });
    this.code = new URL(answer.headers.get("location")).searchParams.get("code");
  }
  saveCodeVerifier(verifier) {
    this._verifier = verifier;
  }
  codeVerifier() {
    return this._verifier;
  }
}

async function connect(url, provider) {
  const client = new Client({ name: "oauth-test", version: "0" });
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
  return client;
}

async function main() {
  const url = new URL(process.argv[2]);
  const title = process.argv[3];
  const provider = new Provider();
  let client;
  let challenged = false;
  try {
    client = await connect(url, provider);
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
    challenged = true;
    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
    await transport.finishAuth(provider.code);
    client = await connect(url, provider);
  }
  const tools = (await client.listTools()).tools.map((t) => t.name);
  const made = await client.callTool({
    name: "remember",
    arguments: { request_id: crypto.randomUUID(), kind: "fact", title, audience: "workspace" },
  });
  await client.close();
  console.log(
    JSON.stringify({
      challenged,
      tools,
      made,
      visited: provider.visited,
      client_id: provider._client && provider._client.client_id,
      scope: provider._tokens && provider._tokens.scope,
    }),
  );
}

main().catch((error) => {
  console.error(error && error.stack ? error.stack : String(error));
  process.exit(1);
});
