//! A TCP relay a test can cut and restore: the network between the gateway and its database
//! failing (issue 53) without stopping the machine's PostgreSQL, which other tests share.
//! While cut, the relay's port is closed (a connection is refused, as to a stopped server)
//! and every relayed connection is closed.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// A relay from a local port to `target`.
pub struct Relay {
    /// Where the relay listens.
    pub addr: SocketAddr,
    target: SocketAddr,
    accepting: Mutex<Option<AbortHandle>>,
    links: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Relay {
    /// Starts relaying every connection to `target`.
    pub async fn start(target: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay = Relay {
            addr: listener.local_addr().unwrap(),
            target,
            accepting: Mutex::new(None),
            links: Arc::default(),
        };
        relay.accept(listener);
        relay
    }

    fn accept(&self, listener: TcpListener) {
        let (target, links) = (self.target, self.links.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                links.lock().unwrap().push(link.abort_handle());
            }
        });
        *self.accepting.lock().unwrap() = Some(task.abort_handle());
    }

    /// Cuts the relay: its port closes and every relayed connection is closed.
    pub fn cut(&self) {
        if let Some(task) = self.accepting.lock().unwrap().take() {
            task.abort();
        }
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    /// Relays again, on the same port.
    pub async fn restore(&self) {
        let listener = TcpListener::bind(self.addr)
            .await
            .expect("the relay's port again");
        self.accept(listener);
    }
}
