//! Chat templates: an instruct model was trained on conversations laid out by the Jinja
//! template its GGUF file carries (`tokenizer.chat_template`); fed raw text it answers
//! something else. The template is rendered with minijinja (a Jinja engine, with Python's
//! string methods that Hugging Face templates call from minijinja-contrib), given the
//! messages, `add_generation_prompt`, the vocabulary's BOS and EOS texts and the
//! `raise_exception` function such templates use to refuse a conversation.

use minijinja::{context, Environment, Error, ErrorKind};
use serde::Serialize;

use super::load::Model;

/// The metadata key of the template.
pub const TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// One turn of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Message {
        Message {
            role: role.to_string(),
            content: content.to_string(),
        }
    }
}

/// A model's chat template, ready to render.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

/// The name the template is registered under.
const NAME: &str = "chat";

/// `raise_exception(msg)`: a template's own refusal, as an error.
fn raise_exception(msg: String) -> Result<String, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

impl ChatTemplate {
    /// The template in `source` (a Jinja text), with the vocabulary's `bos` and `eos` texts;
    /// a template that does not parse is an error naming where.
    pub fn new(source: &str, bos: &str, eos: &str) -> Result<ChatTemplate, String> {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| format!("{TEMPLATE_KEY} does not parse: {e}"))?;
        Ok(ChatTemplate {
            env,
            bos: bos.to_string(),
            eos: eos.to_string(),
        })
    }

    /// `model`'s template (None: the file carries none).
    pub fn of(model: &Model) -> Option<Result<ChatTemplate, String>> {
        let source = model.file.metadata.get_str(TEMPLATE_KEY)?;
        let tok = &model.tokenizer;
        let text = |id: Option<u32>| id.map_or(String::new(), |i| tok.piece(i).to_string());
        Some(ChatTemplate::new(
            source,
            &text(tok.bos()),
            &text(tok.eos()),
        ))
    }

    /// The conversation laid out for the model, followed by the assistant's turn opening when
    /// `add_generation_prompt`.
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        let t = self
            .env
            .get_template(NAME)
            .map_err(|e| format!("{TEMPLATE_KEY}: {e}"))?;
        t.render(context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos,
            eos_token => self.eos,
        })
        .map_err(|e| format!("{TEMPLATE_KEY} failed to render: {e}"))
    }
}

/// A conversation of one user turn, after a system turn when `system` is given.
pub fn conversation(system: Option<&str>, user: &str) -> Vec<Message> {
    let mut m: Vec<Message> = system
        .map(|s| Message::new("system", s))
        .into_iter()
        .collect();
    m.push(Message::new("user", user));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ChatML as SmolLM2 writes it, with its default system turn.
    const CHATML: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are helpful<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn chatml_lays_out_turns_and_the_assistants_opening() {
        let t = ChatTemplate::new(CHATML, "", "<|im_end|>").unwrap();
        let user = t.render(&conversation(None, "Hi"), true).unwrap();
        assert_eq!(
            user,
            "<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let sys = t
            .render(&conversation(Some("Be brief"), "Hi"), false)
            .unwrap();
        assert_eq!(
            sys,
            "<|im_start|>system\nBe brief<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        );
    }

    #[test]
    fn python_string_methods_tokens_and_refusals() {
        let src = "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system turns') }}{% endif %}[{{ m.content.strip().upper() }}]{% endfor %}{{ eos_token }}";
        let t = ChatTemplate::new(src, "<s>", "</s>").unwrap();
        assert_eq!(
            t.render(&conversation(None, "  hi  "), false).unwrap(),
            "<s>[HI]</s>"
        );
        let e = t.render(&conversation(Some("x"), "hi"), false).unwrap_err();
        assert!(e.contains("no system turns"), "{e}");
        let bad = ChatTemplate::new("{% for %}", "", "").err().unwrap();
        assert!(bad.contains(TEMPLATE_KEY), "{bad}");
    }
}
