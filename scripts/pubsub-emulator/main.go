// Command pubsub-emulator serves pstest, the in-memory Pub/Sub fake of
// Google's Go client library (cloud.google.com/go/pubsub/v2), on one loopback
// port: the Publisher, Subscriber and SchemaService gRPC APIs in plain text
// (HTTP/2 without TLS), state in memory only. It logs one "listening" line
// and stops on SIGTERM or SIGINT. scripts/brokers.sh builds and runs it
// (kind pubsub).
//
// What differs from pstest's own server (NewServerWithAddress):
//   - Requests up to 32 MiB reach the service (pstest's server keeps
//     grpc-go's 4 MiB), gzip-compressed ones too. A Publish request over
//     10485760 bytes, the service's limit, fails with INVALID_ARGUMENT and
//     the service's message; one holding a message with neither data nor
//     attributes fails with INVALID_ARGUMENT too (our message: the
//     service's is not known here). pstest checks neither.
//   - -faults DIR: while the file DIR/fault.RPC exists (RPC: Publish,
//     GetTopic, ...), each call of RPC fails with the gRPC code its first
//     word names (UNAVAILABLE when empty), the rest of the line as the
//     message. pstest's reactors (ServerReactorOption) run the check.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	// gzip request bodies, as the service takes them (the Java client's
	// setEnableCompression, Debezium's compression.threshold.bytes).
	_ "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	module = "cloud.google.com/go/pubsub/v2"
	// The service's limit on a Publish request (its error names the number).
	maxRequestBytes = 10 << 20
	maxRecvBytes    = 32 << 20
)

// The calls -faults can fail (pstest runs reactors for these and more;
// StreamingPull has none).
var faultRPCs = []string{
	"CreateTopic", "GetTopic", "ListTopics", "DeleteTopic", "Publish",
	"CreateSubscription", "GetSubscription", "Pull", "Acknowledge", "ModifyAckDeadline",
}

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 0, "port to listen on (required)")
	faults := flag.String("faults", "", "directory of fault.RPC files (optional)")
	version := flag.Bool("version", false, "print the pstest module version and exit")
	flag.Parse()
	if *version {
		fmt.Printf("%s %s\n", module, moduleVersion())
		return
	}
	if *port <= 0 || *port > 65535 {
		fail(errors.New("-port is required (1-65535)"))
	}

	opts := []pstest.ServerReactorOption{{FuncName: "Publish", Reactor: publishCheck{}}}
	if *faults != "" {
		for _, rpc := range faultRPCs {
			// First: a fault wins over the checks.
			opts = append([]pstest.ServerReactorOption{{FuncName: rpc, Reactor: fault{*faults, rpc}}}, opts...)
		}
	}
	// pstest's own server cannot take gRPC options: its service state is
	// served here by a server that can, and its own is closed unused.
	// testutil logs a Serve that returns after that close: nothing else of
	// pstest's writes to the standard logger.
	log.SetOutput(io.Discard)
	fake := pstest.NewServerWithAddress("127.0.0.1:0", opts...)
	fake.Close()

	addr := net.JoinHostPort(*host, fmt.Sprint(*port))
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		fail(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxRecvBytes))
	pb.RegisterPublisherServer(srv, &fake.GServer)
	pb.RegisterSubscriberServer(srv, &fake.GServer)
	pb.RegisterSchemaServiceServer(srv, &fake.GServer)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	fmt.Fprintf(os.Stderr, "pubsub-emulator: pstest of %s %s listening on %s\n", module, moduleVersion(), lis.Addr())
	select {
	case sig := <-stop:
		fmt.Fprintf(os.Stderr, "pubsub-emulator: %v, stopping\n", sig)
		// Not GracefulStop: an open StreamingPull would keep it waiting.
		srv.Stop()
	case err := <-served:
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "pubsub-emulator: %v\n", err)
	os.Exit(1)
}

func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == module {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// publishCheck refuses what the service refuses and pstest takes.
type publishCheck struct{}

func (publishCheck) React(req any) (bool, any, error) {
	r, ok := req.(*pb.PublishRequest)
	if !ok {
		return false, nil, nil
	}
	if proto.Size(r) > maxRequestBytes {
		return true, nil, status.Errorf(codes.InvalidArgument,
			"Request payload size exceeds the limit: %d bytes.", maxRequestBytes)
	}
	for i, m := range r.Messages {
		if len(m.Data) == 0 && len(m.Attributes) == 0 {
			return true, nil, status.Errorf(codes.InvalidArgument,
				"message %d has neither data nor attributes", i)
		}
	}
	return false, nil, nil
}

// fault fails RPC while the file DIR/fault.RPC exists.
type fault struct{ dir, rpc string }

func (f fault) React(any) (bool, any, error) {
	text, err := os.ReadFile(filepath.Join(f.dir, "fault."+f.rpc))
	if err != nil {
		return false, nil, nil
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(text)), "\n")
	name, msg, _ := strings.Cut(line, " ")
	code := codes.Unavailable
	if name != "" {
		if err := json.Unmarshal([]byte(`"`+name+`"`), &code); err != nil {
			code = codes.Internal
			msg = fmt.Sprintf("fault.%s names no gRPC code: %q", f.rpc, name)
		}
	}
	if msg == "" {
		msg = "injected fault (fault." + f.rpc + ")"
	}
	return true, nil, status.Error(code, msg)
}
