package fleet

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// ReadTopic returns the values of every committed record of partition 0
// of topic, in offset order, read with isolation.level = read_committed:
// what a transaction aborted, or a fenced producer wrote, is not there.
func ReadTopic(addr, topic string) ([][]byte, error) {
	conf := kafka.ConfigMap{"bootstrap.servers": addr, "group.id": "fleet-reader", "isolation.level": "read_committed",
		"enable.partition.eof": true, "enable.auto.commit": false, "go.logs.channel.enable": true}
	for k, v := range ClientProperties(addr) {
		conf[k] = v
	}
	c, err := kafka.NewConsumer(&conf)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		return nil, err
	}
	var out [][]byte
	for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); {
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			out = append(out, e.Value)
		case kafka.PartitionEOF:
			return out, nil
		}
	}
	return nil, fmt.Errorf("read %s: no end after 120 s (%d records)", topic, len(out))
}

// ReadCommitted is ReadTopic for a test: an error fails t.
func ReadCommitted(t testing.TB, addr, topic string) [][]byte {
	t.Helper()
	out, err := ReadTopic(addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CountValues reads topic (read_committed) and counts how often each value
// of the integer JSON field appears; a record without it is an error.
func CountValues(addr, topic, field string) (map[int64]int, error) {
	values, err := ReadTopic(addr, topic)
	if err != nil {
		return nil, err
	}
	seen := map[int64]int{}
	for _, v := range values {
		var r map[string]json.RawMessage
		var n int64
		if json.Unmarshal(v, &r) != nil || json.Unmarshal(r[field], &n) != nil {
			return nil, fmt.Errorf("%s: record without an integer %q: %.100q", topic, field, v)
		}
		seen[n]++
	}
	return seen, nil
}

// CountField is CountValues for a test: an error fails t.
func CountField(t testing.TB, addr, topic, field string) map[int64]int {
	t.Helper()
	seen, err := CountValues(addr, topic, field)
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// Exactly counts, of the values from..to-1, those missing from seen and
// those seen more than once.
func Exactly(seen map[int64]int, from, to int64) (missing, twice int64) {
	for v := from; v < to; v++ {
		switch {
		case seen[v] == 0:
			missing++
		case seen[v] > 1:
			twice++
		}
	}
	return missing, twice
}
