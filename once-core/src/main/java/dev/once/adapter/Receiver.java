package dev.once.adapter;

import java.util.List;

/**
 * Receives the next batch from the broker: a long poll, a fetch, or a wait on pushed messages.
 * Returns an empty list when nothing arrived within its own wait; it should return within a few
 * seconds so the loop notices {@link AdapterDriver#stop()}.
 *
 * @param <M> the broker's message type
 */
@FunctionalInterface
public interface Receiver<M> {

    /** @throws Exception a failed receive: the driver backs off and tries again */
    List<M> receive() throws Exception;
}
