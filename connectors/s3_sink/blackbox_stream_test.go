package s3sink_test

// Black-box proof of streamed multipart files (issue 26): the real
// pico-connectors binary writes files far above part_size; its peak RSS
// stays within max_buffer_size of the process's baseline, and SIGKILLs
// while parts go up leave every offset in exactly one object and no
// incomplete upload or staging object behind.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// stagingFolder is where the sink streams parts (stream.go).
const stagingFolder = "_picomq-staging"

// TestBlackboxStream runs the binary against a broker process and
// versitygw; records are produced before each run, by franz-go.
func TestBlackboxStream(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 400 MiB through the binary")
	}
	srv := s3test.Start(t)
	bin := runtimebin.Build(t)
	env := &bbEnv{bin: bin, srv: srv, broker: startBroker(t)}
	t.Run("Memory", env.testStreamMemory)
	t.Run("SIGKILL", env.testStreamKills)
}

// produceJSON writes n records of about size bytes, {"n":i,"pad":...},
// to partition 0 of topic, and returns its end offset.
func (e *bbEnv) produceJSON(t *testing.T, topic string, n, size int) int64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker), kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	pad := make([]byte, size)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	ctx := context.Background()
	for i := range n {
		for j := range pad {
			pad[j] = "0123456789abcdef"[rng.IntN(16)]
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, `{"n":%d,"pad":%q}`, i, pad)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatalf("produce to %s: %v", topic, first)
	}
	return ends(t, e.admin(t), topic)[topic]
}

// stagingLeft lists what is left under prefix of streaming: incomplete
// uploads, and objects in the staging folder.
func (e *bbEnv) stagingLeft(t *testing.T, prefix string) (uploads, objects []string) {
	ctx := context.Background()
	out, err := e.srv.Client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(e.srv.Bucket), Prefix: aws.String(prefix + "/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range out.Uploads {
		uploads = append(uploads, aws.ToString(u.Key))
	}
	objs, err := e.srv.List(ctx, prefix+"/"+stagingFolder+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		objects = append(objects, o.Key)
	}
	return uploads, objects
}

// runPeak runs the sink key over the topic until it has committed past
// its first file, and returns the process's peak RSS (VmHWM) then, after
// a graceful stop.
func (e *bbEnv) runPeak(t *testing.T, key, topic, extra string, end int64) int64 {
	// librdkafka's queue of fetched records (64 MiB by default) held
	// small, in both runs, so that the sink's memory shows.
	def := strings.Replace(e.sinkDef(key, fmt.Sprintf("topic = %q", topic), key+"-1", extra),
		`"session.timeout.ms" = "6000"`, `"session.timeout.ms" = "6000", "queued.max.messages.kbytes" = "8192"`, 1)
	r := e.newRuntime(t, map[string]string{key + ".toml": def})
	t0 := time.Now()
	r.start()
	adm := e.admin(t)
	caughtUp(t, r, key, map[string]int64{}, map[string]int64{topic: end})
	waitCommitted(t, adm, key, map[string]int64{topic: 1}, 0, r)
	peak := r.rss("VmHWM")
	r.stop()
	t.Logf("sink %s wrote %d records in %s", key, end, time.Since(t0).Round(time.Millisecond))
	wantCommitted(t, adm, key, map[string]int64{topic: end})
	return peak
}

// testStreamMemory writes a 200 MiB file with part_size 8MiB and
// max_buffer_size 64MiB: the file is one object, and the process's peak
// RSS is at most 64 MiB above the baseline, the same binary and
// definition writing the same records in files of 1 MiB (one PutObject
// each, a few held at once): what the process holds anyway to read and
// send these records (the consumer's queue, batches, HTTP), so that the
// difference is what the 200 MiB file holds.
func (e *bbEnv) testStreamMemory(t *testing.T) {
	const topic = "bb.mpmem"
	t0 := time.Now()
	end := e.produceJSON(t, topic, 205_000, 1000) // about 208 MiB as JSON lines
	t.Logf("produced %d records in %s", end, time.Since(t0).Round(time.Millisecond))
	base := e.runPeak(t, "bbmpbase", topic, `max_file_size = "1MiB"
part_size = "8MiB"
max_buffer_size = "64MiB"
`, end)
	peak := e.runPeak(t, "bbmpmem", topic, `max_file_size = "200MiB"
part_size = "8MiB"
max_buffer_size = "64MiB"
`, end)
	objs, err := e.srv.List(context.Background(), "bbmpmem/")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak RSS %.1f MiB with a 200 MiB file, %.1f MiB with 1 MiB files (the baseline): %.1f MiB above it; objects %v",
		float64(peak)/(1<<20), float64(base)/(1<<20), float64(peak-base)/(1<<20), objs)
	if len(objs) == 0 || objs[0].Size < 200<<20 || !strings.HasSuffix(objs[0].Key, ".jsonl") {
		t.Fatalf("objects %v: want a first file of 200 MiB or more", objs)
	}
	if peak > base+64<<20 {
		t.Errorf("peak RSS %.1f MiB, above the baseline %.1f MiB + max_buffer_size 64 MiB", float64(peak)/(1<<20), float64(base)/(1<<20))
	}
	if uploads, staged := e.stagingLeft(t, "bbmpmem"); len(uploads)+len(staged) > 0 {
		t.Errorf("left after the run: uploads %v, staging objects %v", uploads, staged)
	}
	t0 = time.Now()
	e.audit(t, "bbmpmem", map[string]int64{topic: end})
	t.Logf("audit in %s", time.Since(t0).Round(time.Millisecond))
}

// testStreamKills SIGKILLs the binary while a file's parts go up, several
// times, then lets it finish: every offset in exactly one object, no
// commit ahead of the bucket, and no incomplete upload or staging object
// left under the prefix.
func (e *bbEnv) testStreamKills(t *testing.T) {
	const topic, key = "bb.mpkill", "bbmpkill"
	end := e.produceJSON(t, topic, 100_000, 1000) // about 110 MiB: 4 files and a half
	r := e.newRuntime(t, map[string]string{key + ".toml": e.sinkDef(key, fmt.Sprintf("topic = %q", topic), key+"-1", `max_file_size = "24MiB"
part_size = "5MiB"
max_buffer_size = "32MiB"
`)}) // files stream above 8 MiB, a quarter of max_buffer_size
	adm := e.admin(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 26))
	kills := 0
	for i := range 4 {
		if c, err := committed(adm, key); err != nil || c[topic] > end-15_000 {
			break // too few records left for a file to stream
		}
		kills++
		r.start()
		testwait.For(t, 90*time.Second, "a staging upload to start", func() bool {
			uploads, _ := e.stagingLeft(t, key)
			for _, u := range uploads {
				if strings.Contains(u, "/"+stagingFolder+"/") {
					return true
				}
			}
			return false
		})
		// Mostly while parts go up, sometimes at a cut (staging
		// completed, copied, deleted) or in the next file.
		time.Sleep(time.Duration(rng.IntN(1200)) * time.Millisecond)
		r.kill()
		_, line := e.afterKill(t, adm, key, topic, i+1)
		uploads, staged := e.stagingLeft(t, key)
		t.Logf("seed %d, SIGKILL %d: %s; left: %d uploads, %d staging objects", seed, i+1, line, len(uploads), len(staged))
	}
	if kills < 2 {
		t.Fatalf("%d SIGKILLs while parts went up, want at least 2", kills)
	}
	from, err := committed(adm, key)
	if err != nil {
		t.Fatal(err)
	}
	r.start()
	caughtUp(t, r, key, from, map[string]int64{topic: end})
	r.stop()
	wantCommitted(t, adm, key, map[string]int64{topic: end})
	if uploads, staged := e.stagingLeft(t, key); len(uploads)+len(staged) > 0 {
		t.Errorf("left after the last run: uploads %v, staging objects %v", uploads, staged)
	}
	e.audit(t, key, map[string]int64{topic: end})
}
