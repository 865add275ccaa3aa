//! Every message a peer can send, decoded from arbitrary bytes as `read_frame` does:
//! an error or a message, never a panic; a message re-encodes to a frame that decodes
//! to the same message.
#![no_main]

use flint_net::decode;
use flint_proto::wire::{
    BlockReply, Chunk, DriverMessage, ExecutorMessage, Heartbeat, Hello, HelloReply, InputReply, OutputReply,
    PeerHello, PeerHelloReply, PeerRequest, Request, SliceHeader, SliceReply, SubmitReply,
};
use flint_proto::{ClusterStatus, StatusUpdate};
use libfuzzer_sys::fuzz_target;

fn check<T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    if let Ok(message) = decode::<T>(bytes) {
        let again = postcard::to_stdvec(&message).expect("a decoded message encodes");
        assert_eq!(decode::<T>(&again).expect("and decodes again"), message);
    }
}

fuzz_target!(|bytes: &[u8]| {
    check::<Hello>(bytes);
    check::<HelloReply>(bytes);
    check::<ExecutorMessage>(bytes);
    check::<DriverMessage>(bytes);
    check::<Heartbeat>(bytes);
    check::<Request>(bytes);
    check::<SubmitReply>(bytes);
    check::<BlockReply>(bytes);
    check::<InputReply>(bytes);
    check::<Chunk>(bytes);
    check::<StatusUpdate>(bytes);
    check::<ClusterStatus>(bytes);
    check::<PeerHello>(bytes);
    check::<PeerHelloReply>(bytes);
    check::<PeerRequest>(bytes);
    check::<SliceReply>(bytes);
    check::<SliceHeader>(bytes);
    check::<OutputReply>(bytes);
});
