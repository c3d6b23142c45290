// The reply port's type is the answer's type: asking a `Reply<u64>` for a `String` is refused.
use procsched::prelude::*;

enum Account {
    Balance(Reply<u64>),
}

async fn balance(addr: Addr<Account>) -> Result<String, AskError> {
    let balance: String = addr.ask(Account::Balance).await?;
    Ok(balance)
}

fn main() {
    let _ = balance;
}
