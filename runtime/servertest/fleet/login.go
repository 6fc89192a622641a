package fleet

import (
	"maps"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/picomq/pico-connectors/runtime/broker"
)

// BrokerPassword is the embedded_password of every runtime NewRuntime
// starts with its own embedded broker, and the password the others
// (Options.Bootstrap) and this package's clients log in to such a broker
// with, as broker.User: the embedded broker admits no client that does not
// log in. A broker the caller started in its process (broker.Start
// without a password) is used without a login.
const BrokerPassword = "fleet-test-broker-password"

// embedded holds the addresses of the embedded brokers of the runtimes
// this process wrote (NewRuntime).
var embedded sync.Map

// needsLogin reports whether the broker list addrs names such a broker.
func needsLogin(addrs string) bool {
	for _, a := range strings.Split(addrs, ",") {
		if _, ok := embedded.Load(strings.TrimSpace(a)); ok {
			return true
		}
	}
	return false
}

// brokerProperties are the librdkafka settings of a client of such a
// broker.
var brokerProperties = map[string]string{
	"security.protocol": "SASL_PLAINTEXT",
	"sasl.mechanisms":   "SCRAM-SHA-256",
	"sasl.username":     broker.User,
	"sasl.password":     BrokerPassword,
}

// ClientProperties returns the librdkafka settings a client of the
// brokers addr needs besides bootstrap.servers: the login when a Runtime of
// this package serves them, else none.
func ClientProperties(addr string) map[string]string {
	if !needsLogin(addr) {
		return nil
	}
	return maps.Clone(brokerProperties)
}

// NewClient is a franz-go client of the brokers addr, logged in when a
// Runtime of this package serves them.
func NewClient(addr string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(ClientOptions(addr, opts...)...)
}

// ClientOptions are the franz-go options of a client of the brokers addr:
// the seeds, the login when a Runtime of this package serves them, and
// then opts.
func ClientOptions(addr string, opts ...kgo.Opt) []kgo.Opt {
	base := []kgo.Opt{kgo.SeedBrokers(strings.Split(addr, ",")...)}
	if needsLogin(addr) {
		base = append(base, kgo.SASL(scram.Auth{User: broker.User, Pass: BrokerPassword}.AsSha256Mechanism()))
	}
	return append(base, opts...)
}
