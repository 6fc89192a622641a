package api_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/picomq/pico-connectors/runtime/api"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/sdk"
)

// marker is the value every secret gets in TestSecretsNeverShown.
const marker = "PICOSECRETMARKER7f3a9c"

// realistic overrides made-up sample values of some plugins, so that each
// connector gets as far as it can (and fails fast) on this machine.
var realistic = map[string]map[string]any{
	"s3_sink": {
		"bucket": "pico-secrets", "region": "us-east-1", "endpoint": "https://127.0.0.1:1", // https: sse_customer_key is refused over http
		"max_attempts": 1, "retry_delay": "10ms",
	},
	"random_source": {"records_per_batch": 5, "interval": "20ms", "payload_size": "16B"},
}

// secretValue is what a secret is set to: the marker itself, or for a
// key whose examples are URLs, a URL with the marker as its password, so
// that validate takes it (a bare marker is no connection string) and the
// connector gets as far as connecting (to a closed port). With keyValue, a
// PostgreSQL connection string is written as key=value pairs instead, the
// other form a secret that is not a URL takes.
func secretValue(s *jsonSchema, keyValue bool) string {
	for _, ex := range s.Examples {
		if str, ok := ex.(string); ok && strings.Contains(str, "://") {
			scheme := str[:strings.Index(str, "://")]
			if keyValue && strings.HasPrefix(scheme, "postgres") {
				return "host=127.0.0.1 port=1 user=pico password=" + marker + " dbname=pico connect_timeout=1"
			}
			return scheme + "://pico:" + marker + "@127.0.0.1:1/pico?connect_timeout=1"
		}
	}
	if s.Pattern != "" {
		// A secret with a pattern (the S3 sink's sse_customer_key, the
		// base64 of 32 bytes; iceberg_catalog_credential, id:secret) gets
		// the marker padded, or after an id, until it fits.
		re := regexp.MustCompile(s.Pattern)
		for _, id := range []string{"", "pico:"} {
			for n := 0; n <= 64; n++ {
				for _, end := range []string{"", "=", "=="} {
					if v := id + marker + strings.Repeat("A", n) + end; re.MatchString(v) {
						return v
					}
				}
			}
		}
	}
	return marker
}

type plannedConnector struct {
	reg      sdk.Registration
	key      string
	viaEnv   bool
	secrets  [][]string // paths set to the marker
	def      map[string]any
	envPairs []string
}

func schemaAt(s *jsonSchema, path []string) *jsonSchema {
	for _, p := range path {
		s = s.Properties[p]
	}
	return s
}

// planConnectors makes two definitions per registered sink and source
// with secrets: KEY_file with every secret in its file, KEY_env with every
// secret in PICOMQ_CONNECTORS_..._PLUGIN_CONFIG_... variables. Transforms
// with secrets are attached to the random source definitions.
func planConnectors(t *testing.T) (out []*plannedConnector, transforms map[bool][]map[string]any, transformEnv []string) {
	t.Helper()
	transforms = map[bool][]map[string]any{}
	for _, reg := range sdk.All() {
		s, err := parseSchema(reg.Schema)
		if err != nil {
			t.Fatalf("%s: schema: %v", reg.Name, err)
		}
		secrets := secretPaths(s)
		if reg.Kind == sdk.KindTransform {
			if len(secrets) > 0 {
				t.Logf("transform %s has secrets %v", reg.Name, secrets)
				for _, viaEnv := range []bool{false, true} {
					m := map[string]any{"type": reg.Name}
					for _, k := range s.Required {
						m[k] = sampleValue(s.Properties[k])
					}
					for _, p := range secrets {
						if !viaEnv {
							setPath(m, p, marker)
						}
					}
					transforms[viaEnv] = append(transforms[viaEnv], m)
				}
			}
			continue
		}
		if len(secrets) == 0 && reg.Name != "random_source" {
			continue
		}
		for _, viaEnv := range []bool{false, true} {
			suffix := "_file"
			if viaEnv {
				suffix = "_env"
			}
			pc := &plannedConnector{reg: reg, key: reg.Name + suffix, viaEnv: viaEnv, secrets: secrets}
			cfg := map[string]any{}
			for _, k := range s.Required {
				cfg[k] = sampleValue(s.Properties[k])
			}
			for k, v := range realistic[reg.Name] {
				cfg[k] = v
			}
			typ := strings.ToUpper(string(reg.Kind))
			prefix := "PICOMQ_CONNECTORS_" + typ + "_" + strings.ToUpper(pc.key) + "_PLUGIN_CONFIG_"
			for _, p := range secrets {
				v := secretValue(schemaAt(s, p), !viaEnv)
				if viaEnv {
					pc.envPairs = append(pc.envPairs, envName(prefix, p)+"="+v)
				} else {
					setPath(cfg, p, v)
				}
			}
			topic := map[string]any{"topic": "secrets." + pc.key, "create_topics": true}
			if reg.Kind == sdk.KindSink {
				topic = map[string]any{"pattern": `^secrets\..*`}
			}
			pc.def = map[string]any{
				"type": string(reg.Kind), "key": pc.key, "enabled": true, "version": 1,
				"name": "secrets " + pc.key, "path": reg.Path,
				"topics":        []map[string]any{topic},
				"plugin_config": cfg,
			}
			out = append(out, pc)
		}
	}
	for _, pc := range out {
		if pc.reg.Name == "random_source" && len(transforms[pc.viaEnv]) > 0 {
			pc.def["transforms"] = transforms[pc.viaEnv]
			if pc.viaEnv {
				for i, m := range transforms[true] {
					s, _ := parseSchema(mustLookup(t, m["type"].(string)).Schema)
					for _, p := range secretPaths(s) {
						transformEnv = append(transformEnv, fmt.Sprintf("PICOMQ_CONNECTORS_SOURCE_%s_TRANSFORMS_%d_%s=%s",
							strings.ToUpper(pc.key), i, strings.ToUpper(strings.Join(p, "_")), marker))
					}
				}
			}
		}
	}
	return out, transforms, transformEnv
}

func mustLookup(t *testing.T, name string) sdk.Registration {
	for _, r := range sdk.All() {
		if r.Name == name || r.Path == name {
			return r
		}
	}
	t.Fatalf("no registration %q", name)
	return sdk.Registration{}
}

// TestSecretsNeverShown sets every secret of every registered connector
// (from definition files and from env variables), the API key, the state
// store's token and a librdkafka password to a marker, runs pico-connectors
// through start, connector failures, a failing state store, restarts and a
// SIGTERM shutdown, and checks that the marker appears in no API answer, no
// metric, no log line and no output of validate or config.
func TestSecretsNeverShown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs pico-connectors; skipped with -short")
	}
	planned, _, transformEnv := planConnectors(t)
	withSecrets := 0
	for _, pc := range planned {
		withSecrets += len(pc.secrets)
	}
	if withSecrets == 0 {
		t.Fatalf("no registered connector has an x-secret key; registrations: %v", names(sdk.All()))
	}
	bin := runtimebin.Build(t)
	store := newStateServer(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"runtime.toml": fmt.Sprintf(`
shutdown_grace = "20s"
[broker]
embedded_address = "127.0.0.1:0"
[broker.properties]
"sasl.password" = %q
[http]
address = "127.0.0.1:0"
api_key = %q
[state]
storage = "http"
[state.http]
url = %q
max_attempts = 2
retry_delay = "5ms"
timeout = "2s"
[log]
format = "json"
level = "debug"
`, marker, marker, strings.Replace(store.URL, "http://", "http://pico:"+marker+"@", 1)+"/state")})
	env := []string{"PICOMQ_CONNECTORS_STATE_HTTP_API_KEY=" + marker}
	env = append(env, transformEnv...)
	for _, pc := range planned {
		b, err := toml.Marshal(pc.def)
		if err != nil {
			t.Fatal(err)
		}
		writeFiles(t, dir, map[string]string{"connectors/" + pc.key + ".toml": string(b)})
		env = append(env, pc.envPairs...)
		t.Logf("%s %s: secrets %v via env %v", pc.reg.Kind, pc.key, pc.secrets, pc.viaEnv)
	}
	cfgPath := filepath.Join(dir, "runtime.toml")
	var seen strings.Builder // everything the runtime showed

	// validate and config, for the whole config and each connector.
	cli := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, _ := cmd.CombinedOutput()
		seen.WriteString(strings.Join(args, " ") + "\n" + string(out) + "\n")
		return string(out)
	}
	cli("validate", "--config", cfgPath)
	cli("config", "--config", cfgPath)
	cli("config", "--config", cfgPath, "--json")
	for _, pc := range planned {
		if out := cli("config", "--config", cfgPath, pc.key, "--json"); !strings.Contains(out, confkit.Mask) && len(pc.secrets) > 0 {
			t.Errorf("config %s shows no mask:\n%s", pc.key, out)
		}
	}

	p := startProcess(t, bin, cfgPath, env)
	c := &client{base: "http://" + p.apiAddress(t), key: marker}
	// The API key works, a wrong one is refused.
	if code, _ := c.do(t, "GET", "/sources"); code != 200 {
		t.Fatalf("GET /sources with the marker API key = %d", code)
	}
	if code, _ := (&client{base: c.base, key: "wrong"}).do(t, "GET", "/sources"); code != 401 {
		t.Errorf("wrong API key = %d, want 401", code)
	}

	entry := func(pc *plannedConnector) api.Entry {
		code, b := c.do(t, "GET", "/"+string(pc.reg.Kind)+"s/"+pc.key)
		if code != 200 {
			t.Fatalf("GET %s = %d %s", pc.key, code, b)
		}
		var e api.Entry
		json.Unmarshal(b, &e)
		return e
	}
	wait := func(what string, cond func() bool) {
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; output:\n%s", what, p.out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Every connector settles: the random sources run, the others fail
	// against closed ports.
	for _, pc := range planned {
		wait(pc.key+" to leave Starting", func() bool {
			st := entry(pc).Status
			return st == "Running" || st == "Error" || st == "Stopped"
		})
		t.Logf("%s: %s %q", pc.key, entry(pc).Status, entry(pc).LastError)
	}
	if got := store.auth.Load(); got != "Bearer "+marker {
		t.Errorf("the state store saw Authorization %q, want the marker token (env override lost?)", got)
	}

	scrapeAll := func() {
		for _, path := range []string{"/health", "/sources", "/sinks", "/metrics", "/nowhere"} {
			c.do(t, "GET", path)
		}
		for _, pc := range planned {
			base := "/" + string(pc.reg.Kind) + "s/" + pc.key
			c.do(t, "GET", base)
			code, b := c.do(t, "GET", base+"/config")
			var m map[string]any
			if code != 200 || json.Unmarshal(b, &m) != nil {
				t.Fatalf("GET %s/config = %d %s", base, code, b)
			}
			for _, path := range pc.secrets {
				var v any = m["plugin_config"]
				for _, k := range path {
					mm, _ := v.(map[string]any)
					v = mm[k]
				}
				if v != confkit.Mask {
					t.Errorf("%s/config: %s = %v, want %q (the secret was not set, or not masked)", base, strings.Join(path, "."), v, confkit.Mask)
				}
			}
		}
	}
	scrapeAll()

	// Failures: the state store fails, then recovers; every connector is
	// restarted through the API.
	store.fail.Store(true)
	for _, pc := range planned {
		if pc.reg.Name == "random_source" {
			wait(pc.key+" to fail on the state store", func() bool { return entry(pc).Status == "Error" })
		}
	}
	scrapeAll()
	store.fail.Store(false)
	for _, pc := range planned {
		code, b := c.do(t, "POST", "/"+string(pc.reg.Kind)+"s/"+pc.key+"/restart")
		var e api.Entry
		json.Unmarshal(b, &e)
		t.Logf("restart %s: %d %s", pc.key, code, e.Status)
	}
	for _, pc := range planned {
		if pc.reg.Name == "random_source" {
			wait(pc.key+" to run again", func() bool { return entry(pc).Status == "Running" })
		}
	}
	scrapeAll()
	p.stop(t, 60*time.Second)

	seen.WriteString(c.seen.String())
	seen.WriteString(p.out.String())
	all := seen.String()
	if !strings.Contains(p.out.String(), "connector status changed") {
		t.Errorf("the log has no status changes; was the log captured?\n%s", p.out.String())
	}
	if n := strings.Count(all, marker); n > 0 {
		var lines []string
		for _, l := range strings.Split(all, "\n") {
			if strings.Contains(l, marker) {
				lines = append(lines, l)
			}
		}
		sort.Strings(lines)
		t.Fatalf("the marker appears %d times; lines:\n%s", n, strings.Join(lines, "\n"))
	}
	t.Logf("checked %d bytes of API answers, metrics, logs and CLI output; %d secrets set", len(all), withSecrets)
}

func names(rs []sdk.Registration) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Path)
	}
	return out
}
