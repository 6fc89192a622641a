package sourceloop

import (
	"fmt"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/transform"
	"github.com/picomq/pico-connectors/sdk"
)

const seqAvro = `{"type":"record","name":"Seq","fields":[{"name":"seq","type":"long"},{"name":"tenant","type":"string"},{"name":"origin","type":"string"}]}`

// TestTransformsAvroAndRouting: decode JSON, add a field, route by a field,
// and write Avro binary.
func TestTransformsAvroAndRouting(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 4, limit: 8}
	store := &memStore{}
	r := start(t, Config{
		Topics: []definition.Topics{{
			Topic:  definition.Route{Strategy: "field", Path: "tenant", Template: "avro.{value}"},
			Schema: "avro", AvroSchemaJSON: seqAvro, CreateTopics: true,
		}},
		Transforms: []sdk.Transform{transform.AddFields(map[string]any{"origin": "loop"}, true), transform.DeleteFields([]string{"extra"})},
		Source:     src, Store: store, BootstrapServers: b.Addr(),
	})
	testwait.For(t, time.Minute, "state 8", func() bool { return store.get("seq") == "8" })
	r.stop(t)
	schema := avro.MustParse(seqAvro)
	var got []string
	for _, rec := range readTopic(t, b, "avro.t1") {
		var v struct {
			Seq    int64  `avro:"seq"`
			Tenant string `avro:"tenant"`
			Origin string `avro:"origin"`
		}
		if err := avro.Unmarshal(schema, rec.Value, &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d/%s/%s", v.Seq, v.Tenant, v.Origin))
	}
	if fmt.Sprint(got) != "[1/t1/loop 3/t1/loop 5/t1/loop 7/t1/loop]" {
		t.Fatalf("avro.t1 = %v", got)
	}
}

// TestTransformErrorNacks: a transform that fails nacks the batch.
func TestTransformErrorNacks(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 4, limit: 8, payload: func(n int) []byte { return []byte(`[1,2]`) }}
	store := &memStore{}
	r := start(t, Config{Topics: []definition.Topics{literal("x")}, Transforms: []sdk.Transform{transform.DeleteFields([]string{"a"})},
		Source: src, Store: store, BootstrapServers: b.Addr(), MaxConsecutiveNacks: 2, RetryDelay: 1})
	err := <-r.done
	close(r.done)
	if err == nil || store.get("seq") != "" {
		t.Fatalf("err %v, state %q", err, store.get("seq"))
	}
}
