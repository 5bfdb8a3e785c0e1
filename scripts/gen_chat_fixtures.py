#!/usr/bin/env python3
"""gen_chat_fixtures.py — regenerate the chat fixtures of the families added after the first
three (gemma, phi3, llama3.1): each model family's published Jinja template (the chat_template string
of its tokenizer_config.json, copied below) rendered with jinja2 the way transformers'
apply_chat_template renders it (trim_blocks, lstrip_blocks, raise_exception), over the
conversations of scripts/gen_tokenizer_fixtures.py and a few more.

As for the other families, bos_token and eos_token render as "": the tokenizer adds BOS, and
the eos_token that Phi-3's template writes when no generation prompt is asked for ends a
training sample (the built-in formatter leaves it out; src/format/chat.c says so). Cases a
template refuses (Gemma 1/2 reject a system message; both Gemma templates reject roles that do
not alternate) are skipped: no case is written for them.

Outputs (read by tests/test_chat.c):
  tests/fixtures/chat/families.txt        cases in chat.txt's format (see write())
  tests/fixtures/chat/template_<id>.jinja the template strings, for the detection tests

Needs only jinja2 (pip install jinja2). Usage: python3 scripts/gen_chat_fixtures.py
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "chat")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from gen_tokenizer_fixtures import CONVERSATIONS  # noqa: E402

# google/gemma-2-2b-it (the same as gemma-7b-it / gemma-1.1): no system role.
GEMMA2_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
    "supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}"
    "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)

# google/gemma-3-*-it: a leading system message opens the first user turn.
GEMMA3_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\n'}}\n"
    "{%- endif -%}\n"
)

# microsoft/Phi-3-mini-4k-instruct
PHI3_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)

# microsoft/Phi-3.5-mini-instruct: as Phi-3, an empty system message is left out.
PHI35_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}"
    "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}"
    "{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)

# meta-llama/Llama-3.1-8B-Instruct (tools and builtin_tools undefined: the plain-chat path;
# date_string undefined: "26 Jul 2024")
LLAMA31_TEMPLATE = """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\\n\\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
    {%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\\n\\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""
# (abridged: the assistant tool-call branch, which plain conversations never take, is left out)

TEMPLATES = [  # (family name for lc_chat_template_from_name, id, template)
    ("gemma", "gemma2", GEMMA2_TEMPLATE),
    ("gemma", "gemma3", GEMMA3_TEMPLATE),
    ("phi3", "phi3", PHI3_TEMPLATE),
    ("phi3", "phi35", PHI35_TEMPLATE),
    ("llama3.1", "llama31", LLAMA31_TEMPLATE),
]

MORE = [
    [("system", "  Answer in French.\n"), ("user", " Hello "), ("assistant", "Bonjour."),
     ("user", "Thanks")],
    [("user", "A question with <b>markup</b> & symbols: 1 < 2"), ("assistant", "Yes.\n\n")],
    [("system", "S"), ("user", "U1"), ("assistant", "A1"), ("user", "U2"), ("assistant", "A2"),
     ("user", "U3")],
]


def render(template, msgs, add_gen):
    import jinja2

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(
        messages=[{"role": r, "content": c} for r, c in msgs], add_generation_prompt=add_gen,
        bos_token="", eos_token="")


def write():
    """families.txt: blocks of
         case <family> 0 <add_assistant 0|1> <n_msgs> jinja <template id>
         msg <role> <hex content>            (n_msgs lines)
         expect <hex>"""
    import jinja2
    os.makedirs(OUT, exist_ok=True)
    lines, n, skipped = [], 0, 0
    for family, tid, tmpl in TEMPLATES:
        for msgs in CONVERSATIONS + MORE:
            for add_gen in (True, False):
                try:
                    exp = render(tmpl, msgs, add_gen)
                except jinja2.exceptions.TemplateError:
                    skipped += 1
                    continue
                lines.append("case %s 0 %d %d jinja %s" % (family, 1 if add_gen else 0,
                                                           len(msgs), tid))
                for r, c in msgs:
                    lines.append("msg %s %s" % (r, c.encode().hex()))
                lines.append("expect %s" % exp.encode().hex())
                n += 1
        with open(os.path.join(OUT, "template_%s.jinja" % tid), "w") as f:
            f.write(tmpl)
    with open(os.path.join(OUT, "families.txt"), "w") as f:
        f.write("# generated by scripts/gen_chat_fixtures.py (jinja2 %s): chat template "
                "expectations\n" % jinja2.__version__)
        f.write("\n".join(lines) + "\n")
    print("families.txt: %d cases (%d the templates refuse, skipped)" % (n, skipped))


if __name__ == "__main__":
    write()
