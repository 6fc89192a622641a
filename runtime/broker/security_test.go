package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const testPassword = "correct-horse-battery-staple"

func newClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestStrangersCannotDeleteOrCommit: with a password, a client without
// credentials can do nothing, and a user other than the runtime's may only
// produce and consume the topics it was given: no deletes, no group
// offsets, no other topics.
func TestStrangersCannotDeleteOrCommit(t *testing.T) {
	b, err := Start(Config{Address: "127.0.0.1:0", AutoCreateTopics: true, Password: testPassword,
		Topics: []string{"demo.numbers"}, TopicPrefixes: []string{"orders."}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := shortCtx(t)
	// The runtime's own client: everything.
	own := newClient(t, b.clientOpts(kgo.AllowAutoTopicCreation())...)
	for _, topic := range []string{"demo.numbers", "orders.eu", "pico-connectors.state.gen"} {
		if err := own.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("runtime client, produce to %s: %v", topic, err)
		}
	}
	ownAdm := kadm.NewClient(own)
	offs := kadm.Offsets{}
	offs.AddOffset("demo.numbers", 0, 1, -1)
	if err := ownAdm.CommitAllOffsets(ctx, "pico-connectors-archive", offs); err != nil {
		t.Fatalf("runtime client, commit: %v", err)
	}

	// No credentials: the broker answers nothing but ApiVersions and the
	// SASL handshake.
	anon := kadm.NewClient(newClient(t, kgo.SeedBrokers(b.Addr()), kgo.RequestRetries(0)))
	if _, err := anon.DeleteTopic(shortCtx(t), "demo.numbers"); err == nil {
		t.Error("a client without credentials deleted demo.numbers")
	}
	if err := anon.CommitAllOffsets(shortCtx(t), "pico-connectors-archive", offs); err == nil {
		t.Error("a client without credentials committed the sink's offsets")
	}

	// Another user (made by the superuser): produce and consume the
	// definitions' topics, nothing else.
	if _, err := ownAdm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-password"}}); err != nil {
		t.Fatal(err)
	}
	alice := newClient(t, kgo.SeedBrokers(b.Addr()), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-password"}.AsSha256Mechanism()),
		kgo.RequestRetries(1), kgo.RecordDeliveryTimeout(3*time.Second))
	for _, topic := range []string{"demo.numbers", "orders.eu"} {
		if err := alice.ProduceSync(shortCtx(t), &kgo.Record{Topic: topic, Value: []byte("y")}).FirstErr(); err != nil {
			t.Fatalf("alice, produce to %s: %v", topic, err)
		}
	}
	if err := alice.ProduceSync(shortCtx(t), &kgo.Record{Topic: "pico-connectors.state.gen", Value: []byte(`{"next_seq":900000000}`)}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice, produce to a state topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	aliceAdm := kadm.NewClient(alice)
	if ends, err := aliceAdm.ListEndOffsets(shortCtx(t), "demo.numbers"); err != nil || ends.Error() != nil {
		t.Errorf("alice, list offsets of demo.numbers: %v %v", err, ends.Error())
	}
	if r, err := aliceAdm.DeleteTopic(shortCtx(t), "demo.numbers"); err == nil && r.Err == nil {
		t.Error("alice deleted demo.numbers")
	}
	err = aliceAdm.CommitAllOffsets(shortCtx(t), "pico-connectors-archive", offs)
	if err == nil {
		t.Error("alice committed the sink's offsets")
	}
	if _, err := aliceAdm.AlterUserSCRAMs(shortCtx(t), nil, []kadm.UpsertSCRAM{{User: User, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "mine"}}); err == nil {
		// The per-user result carries the error.
		if res, _ := aliceAdm.DescribeUserSCRAMs(shortCtx(t)); res != nil && res.Error() == nil {
			t.Error("alice may manage users")
		}
	}
	if b.HighWatermark("demo.numbers") != 2 {
		t.Fatalf("demo.numbers high watermark = %d, want 2", b.HighWatermark("demo.numbers"))
	}
	fetched, err := ownAdm.FetchOffsets(ctx, "pico-connectors-archive")
	if o, ok := fetched.Lookup("demo.numbers", 0); err != nil || !ok || o.At != 1 {
		t.Fatalf("the sink's commit: %+v %v %v", o, ok, err)
	}
	// The runtime's librdkafka clients log in with ClientProperties.
	cm := kafka.ConfigMap{"bootstrap.servers": b.Addr(), "enable.metrics.push": false}
	for k, v := range b.ClientProperties() {
		cm[k] = v
	}
	produceLibrdkafka(t, cm, "demo.numbers")
}

// produceLibrdkafka produces one record with librdkafka (confluent-kafka-go),
// as the runtime's loops do, and waits for its delivery.
func produceLibrdkafka(t *testing.T, cm kafka.ConfigMap, topic string) {
	t.Helper()
	p, err := kafka.NewProducer(&cm)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	done := make(chan kafka.Event, 1)
	if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny}, Value: []byte("z")}, done); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-done:
		if m, ok := e.(*kafka.Message); !ok || m.TopicPartition.Error != nil {
			t.Fatalf("librdkafka delivery: %v", e)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("librdkafka: no delivery in 20s")
	}
}

// TestListenOnAllInterfaces: on 0.0.0.0 the broker's address and the one
// it advertises are dialable; librdkafka failed to resolve ":::PORT".
func TestListenOnAllInterfaces(t *testing.T) {
	b, err := Start(Config{Address: "0.0.0.0:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !strings.HasPrefix(b.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr = %q, want 127.0.0.1:PORT", b.Addr())
	}
	cl := newClient(t, kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(shortCtx(t), &kgo.Record{Topic: "all", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produceLibrdkafka(t, kafka.ConfigMap{"bootstrap.servers": b.Addr(), "message.timeout.ms": 15000, "enable.metrics.push": false}, "all")
	if b.HighWatermark("all") != 2 {
		t.Fatalf("high watermark %d, want 2", b.HighWatermark("all"))
	}
}

// TestBadTopicNamesRefused: names Kafka refuses get INVALID_TOPIC_EXCEPTION,
// by CreateTopics and by auto-creation; 120 "é" became a 720-byte folder
// name and the next start failed.
func TestBadTopicNamesRefused(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Config{Address: "127.0.0.1:0", AutoCreateTopics: true, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation(), kgo.RecordDeliveryTimeout(3*time.Second))
	adm := kadm.NewClient(cl)
	bad := []string{strings.Repeat("é", 120), strings.Repeat("a", 250), ".", "..", "a b", "a/b", ""}
	for _, name := range bad {
		r, err := adm.CreateTopic(shortCtx(t), 1, 1, nil, name)
		if err == nil {
			err = r.Err
		}
		if !errors.Is(err, kerr.InvalidTopicException) {
			t.Errorf("create %q: %v, want INVALID_TOPIC_EXCEPTION", name, err)
		}
	}
	if err := cl.ProduceSync(shortCtx(t), &kgo.Record{Topic: strings.Repeat("é", 120), Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.InvalidTopicException) {
		t.Errorf("auto-create by produce: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	good := strings.Repeat("a", 249)
	if r, err := adm.CreateTopic(shortCtx(t), 1, 1, nil, good); err != nil || r.Err != nil {
		t.Fatalf("create a 249-character name: %v %v", err, r.Err)
	}
	if err := cl.ProduceSync(shortCtx(t), &kgo.Record{Topic: "Ok._-9", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()
	b2, err := Start(Config{Address: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer b2.Close()
	if b2.HighWatermark("Ok._-9") != 1 || b2.HighWatermark(good) != 0 {
		t.Fatal("topics lost in the restart")
	}
	if _, err := Start(Config{Address: "127.0.0.1:0", SeedTopics: []string{".."}}); err == nil || !strings.Contains(err.Error(), `".."`) {
		t.Fatalf("seed topic ..: %v", err)
	}
}

// TestUnloadablePartitionQuarantined: a persisted partition that cannot be
// loaded (a folder that is a file; a topic of an older version whose name
// made a folder name too long) starts empty with an Error log naming it,
// and the other topics keep their records.
func TestUnloadablePartitionQuarantined(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Config{Address: "127.0.0.1:0", AutoCreateTopics: true, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation())
	for _, topic := range []string{"good", "broken"} {
		if err := cl.ProduceSync(shortCtx(t), &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	b.Close()
	// broken's folder becomes a file.
	pdir := filepath.Join(dir, "partitions", "broken-0")
	if err := os.RemoveAll(pdir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pdir, []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A topic written by an older version under a name whose folder name
	// is too long (120 "é", escaped: 720 bytes).
	long := strings.Repeat("é", 120)
	topicsFile := filepath.Join(dir, "topics.json")
	raw, err := os.ReadFile(topicsFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	topics := doc["topics"].([]any)
	var copied map[string]any
	for _, tp := range topics {
		if m := tp.(map[string]any); m["name"] == "good" {
			copied = map[string]any{}
			for k, v := range m {
				copied[k] = v
			}
		}
	}
	if copied == nil {
		t.Fatalf("no topic good in %s", raw)
	}
	copied["name"] = long
	copied["id"] = strings.Repeat("7", 22) + "==" // another base64 uuid
	doc["topics"] = append(topics, copied)
	raw, _ = json.Marshal(doc)
	if err := os.WriteFile(topicsFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	b2, err := Start(Config{Address: "127.0.0.1:0", DataDir: dir, Logger: logger})
	if err != nil {
		t.Fatalf("restart with an unloadable partition: %v", err)
	}
	defer b2.Close()
	if b2.HighWatermark("good") != 1 {
		t.Fatalf("good: high watermark %d, want 1", b2.HighWatermark("good"))
	}
	if b2.HighWatermark("broken") != 0 {
		t.Fatalf("broken: high watermark %d, want 0 (quarantined)", b2.HighWatermark("broken"))
	}
	for _, want := range []string{`level=ERROR msg="embedded broker: persisted partition \"broken\" 0 cannot be loaded, quarantined`, `persisted partition \"` + long + `\" 0 cannot be loaded, quarantined`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
	moved, _ := filepath.Glob(filepath.Join(dir, "quarantine", "broken-0.*"))
	if len(moved) != 1 {
		t.Errorf("quarantine holds %v, want broken-0.*", moved)
	}
}

// TestDataFileModes: the data dir's files are 0600 and its folders 0700,
// those of an older version's data dir included.
func TestDataFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "partitions"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Start(Config{Address: "127.0.0.1:0", AutoCreateTopics: true, DataDir: dir, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, b.clientOpts(kgo.AllowAutoTopicCreation())...)
	if err := cl.ProduceSync(shortCtx(t), &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()
	n := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, info.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 6 {
		t.Fatalf("only %d entries in the data dir", n)
	}
}

// TestPasswordAndACLsAcrossRestarts: with a data dir, a changed password
// takes effect at the next start (kfake restored the stored one), and the
// ACLs follow the topics of this start, not those of the earlier one.
func TestPasswordAndACLsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Config{Address: "127.0.0.1:0", DataDir: dir, Password: "first-password", Topics: []string{"old"}})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	b2, err := Start(Config{Address: "127.0.0.1:0", DataDir: dir, Password: "second-password", Topics: []string{"new"}})
	if err != nil {
		t.Fatalf("restart with another password: %v", err)
	}
	defer b2.Close()
	acls, err := kadm.NewClient(newClient(t, b2.clientOpts()...)).DescribeACLs(shortCtx(t), kadm.NewACLs().Allow().AllowHosts().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range acls {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for _, d := range r.Described {
			names = append(names, d.Name)
		}
	}
	if strings.Join(names, ",") != "new,new,new" {
		t.Fatalf("ACLs on %v, want read, write and describe on new only", names)
	}
}

func TestGeneratedPassword(t *testing.T) {
	dir := t.TempDir()
	pw, err := GeneratedPassword(dir)
	if err != nil || len(pw) < 40 {
		t.Fatalf("%d characters, %v", len(pw), err)
	}
	again, err := GeneratedPassword(dir)
	if err != nil || again != pw {
		t.Fatal("a second call made another password")
	}
	if info, err := os.Stat(filepath.Join(dir, PasswordFile)); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("password file: %v %v", info, err)
	}
	if mem, _ := GeneratedPassword(""); mem == "" || mem == pw {
		t.Fatal("no data dir: want a new random password")
	}
}
