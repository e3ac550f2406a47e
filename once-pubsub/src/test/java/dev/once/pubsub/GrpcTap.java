package dev.once.pubsub;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;

/**
 * A client interceptor that shows a test every message its channel's calls receive and send: what the emulator streams
 * in, and every ack, nack and deadline extension the consumer sends, in the stream or on its own.
 */
final class GrpcTap {

    private GrpcTap() {}

    /**
     * @param received each message a call receives; what it returns is handed on in its place (a test may rewrite it)
     * @param sent each message a call sends, before it goes
     */
    static ClientInterceptor of(UnaryOperator<Object> received, Consumer<Object> sent) {
        return new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(
                    MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                    @Override
                    public void start(Listener<R> listener, Metadata headers) {
                        super.start(
                                new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                                    @Override
                                    @SuppressWarnings("unchecked") // the tap hands back a message of the call's type
                                    public void onMessage(R message) {
                                        super.onMessage((R) received.apply(message));
                                    }
                                },
                                headers);
                    }

                    @Override
                    public void sendMessage(Q message) {
                        sent.accept(message);
                        super.sendMessage(message);
                    }
                };
            }
        };
    }
}
