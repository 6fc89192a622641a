package s3test

import (
	"bytes"
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestStartPutListGet(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	body := []byte("hello\n")
	for _, k := range []string{"b/two", "a/one"} {
		if _, err := s.Client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(s.Bucket), Key: aws.String(k), Body: bytes.NewReader(body),
		}); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	keys := s.Keys(t)
	if len(keys) != 2 || keys[0] != "a/one" || keys[1] != "b/two" {
		t.Fatalf("keys = %v", keys)
	}
	if got := s.MustGet(t, "a/one"); !bytes.Equal(got, body) {
		t.Fatalf("body = %q", got)
	}
	objs, err := s.List(ctx, "b/")
	if err != nil || len(objs) != 1 || objs[0].Size != int64(len(body)) {
		t.Fatalf("list b/ = %v, %v", objs, err)
	}
	s.Close()
	s.Close()
}
