//! Commands: what a process yields, each tied to the type of its reply.

/// A command a process yields; the handler registered for its type runs it and replies with an
/// [`Output`](Command::Output).
///
/// Implement it by hand, or with [`command!`](crate::command!):
///
/// # Examples
///
/// ```
/// use procsched::Command;
///
/// struct LoadOrder(u64);
/// struct Order { sku: String }
///
/// impl Command for LoadOrder {
///     type Output = Order;
/// }
///
/// // The same, for several commands at once:
/// struct Price(String);
/// struct Stock(String);
/// procsched::command! {
///     Price => u64,
///     Stock => u32,
/// }
/// ```
pub trait Command: Send + 'static {
    /// What the command's handler replies with.
    type Output: Send + 'static;
}

/// Implements [`Command`] for each `Type => Output` pair.
///
/// # Examples
///
/// ```
/// struct Double(u64);
/// procsched::command!(Double => u64);
/// fn output_of<C: procsched::Command>() -> &'static str { std::any::type_name::<C::Output>() }
/// assert_eq!(output_of::<Double>(), "u64");
/// ```
#[macro_export]
macro_rules! command {
    ($($command:ty => $output:ty),+ $(,)?) => {
        $(impl $crate::Command for $command {
            type Output = $output;
        })+
    };
}
