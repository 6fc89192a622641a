package s3sink

import (
	"strings"
	"testing"
)

func validOptions() options {
	o := defaultOptions()
	o.Bucket = "picomq-archive"
	o.Region = "eu-west-1"
	return o
}

func TestValidateMessages(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*options)
		want string
	}{
		{"valid", func(*options) {}, ""},
		{"no region", func(o *options) { o.Region = "" }, "region is required"},
		{"buffer", func(o *options) { o.MaxBufferSize = 0 }, "max_buffer_size (0B) must be above 0"},
		{"in flight", func(o *options) { o.MaxInFlight = 0 }, "max_in_flight (0) must be at least 1"},
		{"access only", func(o *options) { o.AccessKeyID = "AKIA" }, "Partially configured credentials: access_key_id is set but secret_access_key is not"},
		{"secret only", func(o *options) { o.SecretAccessKey = "s" }, "Partially configured credentials: secret_access_key is set but access_key_id is not"},
		{"messages", func(o *options) { o.RotateByMessages = true }, "file_rotation is 'messages' but max_messages_per_file is not configured"},
		{"messages ok", func(o *options) { o.RotateByMessages = true; o.MaxMessages = 10 }, ""},
		{"size", func(o *options) { o.MaxFileSize = 6 << 30 }, "max_file_size (6GiB) exceeds S3 single PutObject limit of 5 GiB"},
		{"size at limit", func(o *options) { o.MaxFileSize = 5 << 30 }, ""},
		{"size zero", func(o *options) { o.MaxFileSize = 0 }, "max_file_size (0B) must be above 0"},
		{"attempts", func(o *options) { o.MaxAttempts = 0 }, "max_attempts (0) must be at least 1"},
		{"bucket", func(o *options) { o.Bucket = "ab" }, "bucket 'ab' is not a valid S3 bucket name"},
		{"no bucket", func(o *options) { o.Bucket = "" }, "bucket is required"},
		{"endpoint", func(o *options) { o.Endpoint = "127.0.0.1:9000" }, "endpoint '127.0.0.1:9000' is not a URL"},
	}
	for _, c := range cases {
		o := validOptions()
		c.mod(&o)
		err := o.validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	// Secrets never appear in messages.
	o := validOptions()
	o.SecretAccessKey = "TOPSECRETVALUE"
	if err := o.validate(); err == nil || strings.Contains(err.Error(), "TOPSECRETVALUE") {
		t.Fatalf("err = %v", err)
	}
	// Every problem at once.
	o = validOptions()
	o.Region = ""
	o.MaxAttempts = 0
	if err := o.validate(); err == nil || strings.Count(err.Error(), "\n") != 1 {
		t.Fatalf("want two problems, got %v", err)
	}
}

func TestRegionIsTheSchemasRule(t *testing.T) {
	// The region's form is checked by the schema only: options built in
	// code take any label.
	o := validOptions()
	o.Region = "eusc-de-east-1"
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
}
